"""`roundhouse elements --require` given no file name: said so, not that the current folder
(which an empty path names) is a folder."""

import pytest

from tests.conftest import refused


@pytest.mark.parametrize("given", ["", "  "])
def test_an_empty_require_asks_for_a_file(capsys, given):
    err = refused(capsys, ["elements", "--require", given], "--require: give a Python file of your own elements")
    assert "is a folder" not in err and "Traceback" not in err
