"""Installed, Roundhouse claims one name in site-packages: a wheel built from the repository
holds only the `roundhouse` package (the repository's folders as its subpackages) and its
metadata, with the data files its code reads."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile

import pytest

from tests.conftest import REPO


@pytest.mark.slow
def test_the_wheel_holds_only_the_roundhouse_package(tmp_path):
    source = tmp_path / "src"
    ignore = shutil.ignore_patterns(".git", "__pycache__", "*.egg-info", "build", "runs", ".pytest_cache", ".hypothesis")
    shutil.copytree(REPO, source, symlinks=True, ignore=ignore)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path / "dist"), "."],
        cwd=source,
        check=True,
        capture_output=True,
    )
    (wheel,) = (tmp_path / "dist").glob("roundhouse-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names}
    assert top == {"roundhouse", wheel.name.split("-")[0] + "-" + wheel.name.split("-")[1] + ".dist-info"}
    for module in (
        "runtime/engine.py",
        "elements/sources.py",
        "traces/jobs.py",
        "wire/protocol.py",
        "agents/agent/service.py",
        "tools/cli.py",
    ):
        assert f"roundhouse/{module}" in names, module
    for data in ("runtime/dsl/grammar.lark", "traces/profiles/gavel.csv", "traces/samples/philly-1000.csv"):
        assert f"roundhouse/{data}" in names, data
    # Every shipped graph and cluster spec, where the reproductions and the graphs' own relative
    # paths look for them.
    for folder, suffix in (("graphs", ".sched"), ("clusters", ".toml")):
        shipped = {f"roundhouse/{folder}/{f.name}" for f in (REPO / folder).glob(f"*{suffix}")}
        assert shipped and shipped <= set(names), folder
    entry = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "roundhouse = roundhouse.tools.entry_point:main" in entry
