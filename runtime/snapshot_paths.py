"""Where a snapshot file is written and read (runtime/snapshot.py): the path checked first, so
that what the system cannot take, or a file that is not a regular one, is a SnapshotError naming
the path rather than a traceback, a replaced device or a read that never ends."""

from __future__ import annotations

import errno
import stat
from pathlib import Path

# What a path that exists but is no regular file is, by its stat mode's kind.
_KINDS = (
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISCHR, "a device"),
    (stat.S_ISBLK, "a device"),
    (stat.S_ISSOCK, "a socket"),
)


def _why(err: OSError | ValueError | RuntimeError) -> str:
    """An OSError's or a path's ValueError's or RuntimeError's reason, as people read it."""
    if isinstance(err, ValueError):  # (pathlib's only ValueError for a path: a NUL in it)
        return "the path has a NUL character in it"
    if isinstance(err, RuntimeError):  # (pathlib's resolve() of links that name each other)
        return "its symbolic links name each other in a loop"
    if err.errno == errno.ENAMETOOLONG:
        return "its name is too long for the file system"
    return err.strerror or str(err)


def file_kind(path: Path) -> str | None:
    """What the file at `path` (links followed) is, if it is there and not a regular file or a folder."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return None
    return next((name for test, name in _KINDS if test(mode)), None)


def target_to_write(path: str | Path) -> Path:
    """The file a save writes, `path` with a symbolic link followed (the link is kept: what it
    names gets the snapshot). A save writes the file whole beside it and renames it over it, which
    would put a regular file where a named pipe or a device was: those are refused."""
    from roundhouse.runtime.snapshot import SnapshotError  # (that module uses this one)

    target = Path(path)
    try:
        if target.is_symlink():
            target = target.resolve()
        # Checked first: the partial file goes beside the target, which for a directory is outside it.
        if target.is_dir():
            raise SnapshotError(f"snapshot {path}: is a directory; give the file to write, such as {target / 'run.snap'}")
        kind = file_kind(target)
        if kind:
            raise SnapshotError(
                f"snapshot {path}: is {kind}, not a regular file: a save writes a file whole and puts it in the "
                "path's place; give the path of a file to write, such as run.snap"
            )
        if not target.parent.is_dir():
            raise SnapshotError(f"snapshot {path}: cannot write it: no directory {target.parent}")
    except (OSError, ValueError, RuntimeError) as err:  # (RuntimeError: pathlib's for a loop of links)
        raise SnapshotError(f"snapshot {path}: cannot write it ({_why(err)})") from None
    return target


def read_snapshot_bytes(path: str | Path) -> bytes:
    """The bytes of a snapshot file; a SnapshotError naming it if it cannot be read, or is no
    regular file (a named pipe or a device would be read until a writer closes it, or for ever)."""
    from roundhouse.runtime.snapshot import SnapshotError  # (that module uses this one)

    try:
        kind = file_kind(Path(path))
        if kind:
            raise SnapshotError(f"snapshot {path}: cannot read it: is {kind}, not a snapshot file")
        return Path(path).read_bytes()
    except (OSError, ValueError) as err:
        raise SnapshotError(f"snapshot {path}: cannot read it ({_why(err)})") from None
