"""`roundhouse whatif` given a path that is no regular file: a named pipe is refused at once,
naming it (reading one waits for a writer, for ever), with exit status 2 and no traceback."""

from __future__ import annotations

import os
import subprocess
import sys


def test_a_named_pipe_is_refused_not_read(tmp_path):
    pipe = tmp_path / "journal.sqlite"
    os.mkfifo(pipe)
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from roundhouse.tools.entry_point import main; sys.exit(main())",
            "whatif",
            str(pipe),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert f"{pipe}: is a named pipe, not a file;" in done.stderr
