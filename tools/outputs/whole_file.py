"""Writing a command's output file (a drawing, a figure, a report, a trace, a profile table) whole
or not at all."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from roundhouse.errors import RoundhouseError, UsageError
from roundhouse.runtime.files import file_making_problem, refuse_control_characters, writing


def output_file(text: str, flag: str = "-o") -> Path:
    """The output file a command was given, refused when the text names no file: it is empty,
    or ends in a slash, which names a folder (the file would be written beside it, under the
    folder's name)."""
    if not text.strip():
        raise UsageError(f"{flag}: no file name given")
    refuse_control_characters(text, flag, "file")
    if text.endswith(("/", os.sep)):
        raise UsageError(f"{flag} {text}: names a folder (it ends in a slash); give the file's name")
    return Path(text)


def write_whole(out: Path, data: bytes) -> None:
    """`data` as the file `out`, whole or not at all (`whole_file`): a write that fails (a full
    disk, a file size limit, a folder in the file's place) or is interrupted leaves no
    half-written file, nor a half-overwritten one of an earlier run. A failure is a usage error
    naming `out`."""
    with writing(out), whole_file(str(out)) as through:
        Path(through).write_bytes(data)


@contextlib.contextmanager
def whole_file(output: str) -> Iterator[str]:
    """The path to write `output` through, so that the file holds all that is written or, if
    writing fails or is interrupted, what it held before: a file beside it, with its extension
    (which may say the format), moved onto it once the writer is done; on a failure or an interruption it is removed,
    and an existing output is left as it was. A device or pipe (`-o /dev/stdout`), or a file in a
    folder where no other file can be made, is written in place. A problem that names the file
    names `output`."""
    path = Path(output)
    target = path.resolve() if path.is_symlink() else path  # (a link's file is the one replaced)
    if (path.exists() and not path.is_file()) or file_making_problem(target.parent) is not None:
        try:
            yield output
        except (RoundhouseError, OSError) as err:
            raise _naming(err, None, output) from None
        return
    # (The part's name is kept short enough for any file system, whatever the output's.)
    temp = target.with_name(f".{target.stem[:64]}.{os.getpid()}.partial{target.suffix}")
    try:
        yield str(temp)
        if target.exists():  # (replaced, it keeps its permissions)
            os.chmod(temp, target.stat().st_mode & 0o7777)
        os.replace(temp, target)
    except BaseException as err:
        with contextlib.suppress(OSError):
            temp.unlink()
        if isinstance(err, (RoundhouseError, OSError)):
            raise _naming(err, str(temp), output) from None
        raise


def _naming(err: RoundhouseError | OSError, temp: str | None, output: str) -> RoundhouseError | OSError:
    """`err` with `output` for the file written through (`temp`), and an I/O error that names no
    file naming `output`."""
    if isinstance(err, OSError):
        if err.filename is None or (temp is not None and str(err.filename) == temp):
            return type(err)(err.errno, err.strerror or str(err), output)
        return err
    if temp is None:
        return err

    def swap(value):
        return value.replace(temp, output) if isinstance(value, str) else value

    args = tuple(swap(a) for a in err.args)
    renamed = type(err).__new__(type(err), *args)
    renamed.args = args
    renamed.__dict__.update({k: swap(v) for k, v in err.__dict__.items()})
    return renamed
