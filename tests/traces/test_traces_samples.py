"""Each shipped sample is regenerated with the command in traces/samples/README.md and must
come out byte-identical: the samples are ours, reproducible, and documented."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from roundhouse.tools.cli import main

SAMPLES = Path(__file__).resolve().parents[2] / "traces" / "samples"


def readme_commands() -> dict[str, list[str]]:
    """file name → the arguments after `roundhouse`, as written in the samples README."""
    text = (SAMPLES / "README.md").read_text()
    commands = {}
    for line in re.findall(r"`roundhouse (trace generate [^`]+)`", text):
        argv = shlex.split(line)
        output = argv[argv.index("-o") + 1]
        commands[Path(output).name] = argv
    return commands


def test_readme_covers_every_sample():
    shipped = {p.name for p in SAMPLES.iterdir() if p.name != "README.md"}
    assert shipped == set(readme_commands())


@pytest.mark.parametrize("name", sorted(readme_commands()))
def test_sample_regenerates_byte_identical(tmp_path, name, capsys):
    argv = readme_commands()[name]
    argv[argv.index("-o") + 1] = str(tmp_path / name)
    assert main(argv) == 0
    assert (tmp_path / name).read_bytes() == (SAMPLES / name).read_bytes()
