"""`roundhouse render -o` with a name whose extension is a format render does not write: the
message names that extension, rather than saying the format cannot be told; nothing is written."""

import pytest

from tests.conftest import REPO, refused

LAS = str(REPO / "graphs" / "las.sched")


@pytest.mark.parametrize("name, ext", [("g.jpg", ".jpg"), ("g.svg.bak", ".bak"), ("g.JPEG", ".JPEG")])
def test_an_extension_of_another_format_is_named(tmp_path, capsys, name, ext):
    out = tmp_path / name
    err = refused(capsys, ["render", LAS, "-o", str(out)], f"{ext.lower()} is not a format render writes; end the name in .svg")
    assert "cannot tell" not in err and "Traceback" not in err
    assert not out.exists()


def test_a_name_with_no_extension_is_said_to_have_no_format(tmp_path, capsys):
    out = tmp_path / "g"
    refused(capsys, ["render", LAS, "-o", str(out)], "cannot tell the format; end the name in .svg")
    assert not out.exists()
