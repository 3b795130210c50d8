"""Writing a command's output file (a drawing, a figure, a report) whole or not at all."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from roundhouse.errors import UsageError
from roundhouse.runtime.files import writing


def output_file(text: str, flag: str = "-o") -> Path:
    """The output file a command was given, refused when the text names no file: it is empty,
    or ends in a slash, which names a folder (the file would be written beside it, under the
    folder's name)."""
    if not text.strip():
        raise UsageError(f"{flag}: no file name given")
    if text.endswith(("/", os.sep)):
        raise UsageError(f"{flag} {text}: names a folder (it ends in a slash); give the file's name")
    return Path(text)


def write_whole(out: Path, data: bytes) -> None:
    """`data` as the file `out`: written beside it and renamed into its place once whole, so
    that a write that fails (a full disk, a file size limit, a folder in the file's place)
    leaves no half-written file, nor a half-overwritten one of an earlier run. A failure is a
    usage error naming `out`."""
    # (A link is written through, as a plain write would; the part's name is kept short enough
    # for any file system, whatever the output's.)
    target = out.resolve() if out.is_symlink() else out
    part = target.with_name(f".{target.name[:64]}.{os.getpid()}.part")
    with writing(out):
        try:
            with open(part, "wb") as f:
                f.write(data)
            os.replace(part, target)
        except OSError as err:
            raise OSError(err.errno, err.strerror, str(out)) from None
        finally:  # (whatever stopped it, Ctrl-C too, the part is not left behind)
            with contextlib.suppress(OSError):
                part.unlink(missing_ok=True)
