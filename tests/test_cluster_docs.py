"""docs/clusters.md shows what the cluster code does: every example in it is parsed here."""

import re

from roundhouse.runtime.cluster import Cluster, ClusterSpec
from roundhouse.tools.cli import main
from roundhouse.traces.profiles import ProfileTable
from tests.conftest import REPO

PAGE = (REPO / "docs" / "clusters.md").read_text()
KNOWN = ProfileTable.load().gpu_types
FENCED = re.findall(r"^```(\w*)\n(.*?)^```", PAGE, re.S | re.M)
SPEC_LIKE = re.compile(r"\d+\s*x\s*\d+\S*|\d+:\d+:\d+")


def test_the_page_is_linked_from_the_readme():
    assert "(docs/clusters.md)" in (REPO / "README.md").read_text()


def test_every_toml_example_parses(tmp_path):
    examples = [body for lang, body in FENCED if lang == "toml"]
    assert len(examples) >= 5
    for i, body in enumerate(examples):
        path = tmp_path / f"example-{i}.toml"
        path.write_text(body)
        spec = ClusterSpec.from_toml(path, KNOWN)
        assert spec.name == re.search(r'^name = "(.*)"', body, re.M).group(1)
        assert len(spec.groups) == body.count("[[group]]")
        Cluster(spec)


def test_the_shipped_cluster_files_named_on_the_page_parse():
    for name in re.findall(r"clusters/[\w.-]+\.toml", PAGE):
        Cluster.parse(str(REPO / name), KNOWN)


def test_the_spec_table_says_what_each_spec_gives():
    rows = re.findall(r"^\| `([^`]+)` \| (.+?) \|$", PAGE, re.M)
    assert len(rows) >= 6
    for spec, described in rows:
        assert Cluster.parse(spec, KNOWN).describe() == described


def test_every_spec_string_on_the_page_parses():
    shown = [s for s in re.findall(r"`([^`\n]+)`", PAGE) if SPEC_LIKE.fullmatch(s.strip())]
    for lang, body in FENCED:
        if lang != "text":  # the one block of an error message shows a bad spec on purpose
            shown += re.findall(r"--cluster (\S+)", body) + re.findall(r'cluster\s*=\s*"([^"]+)"', body)
    assert {"32x4:V100", "36:36:36", "32x4:V100@p3.8xlarge", "16x4:V100,16x4:P100"} <= set(shown)
    # (the page's examples of the gpu_types setting name the types its other specs may hold)
    named = [t for value in re.findall(r'gpu_types = "([^"]+)"', PAGE) for t in value.split(",")]
    assert named
    for spec in shown:
        Cluster.parse(str(REPO / spec) if spec.endswith(".toml") else spec, (*KNOWN, *named))


def test_the_error_shown_is_what_run_prints(capsys):
    ((body,),) = [(b,) for lang, b in FENCED if lang == "text"]
    spec = re.search(r"bad cluster '([^']+)'", body).group(1)
    assert main(["run", str(REPO / "graphs" / "las.sched"), "--cluster", spec]) == 2
    assert capsys.readouterr().err == body
