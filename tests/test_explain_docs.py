"""docs/explain.md's examples: the commands it shows, run, print the timelines it shows."""

import re

from roundhouse.tools.cli import main
from tests.conftest import REPO


def examples() -> list[tuple[list[str], str]]:
    """Each ```sh block of `roundhouse` commands, with the plain block after it (what they print)."""
    text = (REPO / "docs" / "explain.md").read_text()
    blocks = re.findall(r"^```(\w*)\n(.*?)^```", text, re.S | re.M)
    out = []
    for (lang, body), (after_lang, after) in zip(blocks, blocks[1:]):
        if lang == "sh" and after_lang == "" and after.startswith("job "):
            commands = [line.split("#")[0].split() for line in body.splitlines() if line.startswith("roundhouse ")]
            out.append((commands, after))
    return out


def test_the_timelines_shown_are_what_the_commands_shown_print(tmp_path, capsys, monkeypatch):
    found = examples()
    assert len(found) == 2
    monkeypatch.chdir(REPO)  # (the commands are run from the repository's folder; their output goes elsewhere)
    for commands, shown in found:
        assert [c[:2] for c in commands] == [["roundhouse", "run"], ["roundhouse", "explain"]]
        folder = commands[0][commands[0].index("--out") + 1]
        here = str(tmp_path / folder)
        for command in commands:
            assert (
                main([here if arg == folder else arg for arg in command[1:]] + (["--quiet"] if command[1] == "run" else [])) == 0
            )
        printed = capsys.readouterr().out.replace(here, folder)
        assert [line.rstrip() for line in printed.splitlines()] == shown.rstrip("\n").splitlines()
