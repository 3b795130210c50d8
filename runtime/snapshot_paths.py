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


# The first bytes of every SQLite database file, a live scheduler's journal's among them.
SQLITE_HEADER = b"SQLite format 3\x00"

# What `saved_state_kind` calls a snapshot file.
A_SNAPSHOT = "a simulation's snapshot"


def saved_state_kind(path: str | Path) -> str | None:
    """What the file at `path` is if it holds a run's saved state, for one given where a graph's
    `.sched` file goes: `A_SNAPSHOT`, or a SQLite database (a live scheduler's journal, or
    another program's); None for anything else. Only a regular file is read: the bytes read
    from a pipe (a shell's `<(...)`) would be gone for the compiler."""
    from roundhouse.runtime.snapshot import FORMAT_NAME  # (that module uses this one)

    try:
        if not Path(path).is_file():
            return None
        with open(path, "rb") as f:
            start = f.read(200)
    except (OSError, ValueError):  # (ValueError: a NUL in the path)
        return None
    if FORMAT_NAME.encode() in start:
        return A_SNAPSHOT
    if start.startswith(SQLITE_HEADER):
        return "a SQLite database (a live scheduler's journal?)"
    return None


def is_snapshot(path: str | Path) -> bool:
    """Whether `path` is a simulation's snapshot file (runtime/snapshot.py: its first line names
    the format) rather than a journal; False for a file that cannot be read or is no regular file."""
    return saved_state_kind(path) == A_SNAPSHOT


def target_to_write(path: str | Path) -> Path:
    """The file a save writes, `path` with a symbolic link followed (the link is kept: what it
    names gets the snapshot). A save writes the file whole beside it and renames it over it, which
    would put a regular file where a named pipe or a device was: those are refused, and so is a
    file that is not a snapshot (an empty one aside)."""
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
        # (A slip, such as the graph's own file given, would lose the user's work without a word.)
        if target.is_file() and target.stat().st_size and not is_snapshot(target):
            raise SnapshotError(
                f"snapshot {path}: the file there is not a snapshot, and a save would replace it; give another "
                "path, or remove the file first"
            )
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
