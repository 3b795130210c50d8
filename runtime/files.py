"""Where commands write (results, renderings, key folders, checkpoints, work folders, journals,
profiles): checked before any work starts, so a bad path is a clear error (exit status 2), never
an OSError traceback, and never a simulation or a measurement thrown away at the end."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import stat
import tempfile
import unicodedata
from pathlib import Path

from roundhouse.errors import UsageError


def make_folder(path: str | Path, what: str) -> Path:
    """Create folder `path` (with its parents) if needed; `what` names it in errors (e.g. '--workdir')."""
    if not str(path).strip():
        raise UsageError(f"{what}: the folder name is empty")
    refuse_control_characters(path, what, "folder")
    folder = Path(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise UsageError(f"{what} {path}: exists and is not a folder") from None
    except OSError as err:
        raise UsageError(f"{what} {path}: cannot create the folder: {err.strerror}") from None
    problem = file_making_problem(folder)
    if problem is not None:
        raise UsageError(f"{what} {path}: the folder is not writable ({problem.strerror})")
    return folder


def file_making_problem(folder: Path) -> OSError | None:
    """Why no file can be made in `folder`, as the OSError making one raised, or None when one
    can. Tried rather than asked: `os.access` says yes to root for /proc and /sys, where no file
    can be made, and a run would find out only when it writes its results. The file made is
    removed at once."""
    try:
        fd, made = tempfile.mkstemp(prefix=".roundhouse-probe-", dir=folder)
    except OSError as err:
        return err
    os.close(fd)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(made)
    return None


def write_problem(file: Path) -> OSError | None:
    """Why file `file` (its folder there) cannot be written, as the OSError writing it would
    raise, naming `file`; None when it can. A file is written beside its place and moved onto it
    (`whole_file`), so the question is whether a file can be made in its folder (a link's file's
    folder); where none can, an existing file is written in place, so it is opened for writing
    (not emptied). An existing file must be writable by its permissions too (one made read-only
    is not replaced). A device or a pipe (`-o /dev/stdout`) is only asked: opening a pipe would
    wait for a reader."""
    try:
        mode: int | None = os.stat(file).st_mode
    except OSError:
        mode = None
    if mode is not None and not os.access(file, os.W_OK):  # (a "no" is sure; a "yes" to root is not)
        return PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(file))
    if mode is not None and not stat.S_ISREG(mode):
        return None
    problem = file_making_problem((file.resolve() if file.is_symlink() else file).parent)
    if problem is not None and mode is not None:
        try:
            os.close(os.open(file, os.O_WRONLY | os.O_CLOEXEC))
            return None
        except OSError as err:
            problem = err
    return None if problem is None else type(problem)(problem.errno, problem.strerror, str(file))


# What marks a folder as one run's results (`roundhouse run --out`) or a sweep's (`roundhouse
# sweep --out`): the two kinds are read differently, so neither is written into the other.
_RUN_MARKS = ("run.json",)
_SWEEP_MARKS = ("results", "summary.csv", "points.csv")


# The files a run writes beside its run.json: with one metrics sink, and with several.
RUN_FILE_NAMES = ("jobs.csv", "summary.json", "explain.parquet")
RUN_FILE_PATTERNS = ("*-jobs.csv", "*-summary.json")


def run_files_without_record(folder: Path) -> list[str]:
    """Files named as a run's results in a folder with no run.json: no run of ours wrote them
    (a run writes its run.json last, listing them), so a run must not replace or remove them."""
    if (folder / "run.json").exists():
        return []
    found = {name for name in RUN_FILE_NAMES if (folder / name).exists()}
    found |= {path.name for pattern in RUN_FILE_PATTERNS for path in folder.glob(pattern)}
    return sorted(found)


def holds_a_sweep(folder: Path) -> bool:
    """Whether `folder` holds a sweep's results (`roundhouse sweep --out`)."""
    return any((folder / name).exists() for name in _SWEEP_MARKS)


def results_folder(path: str | Path, what: str, kind: str) -> Path:
    """`make_folder` for a command's results, `kind` "run" or "sweep": a folder that holds the
    other kind's results is refused (each would hide the other from `report`, `plot` and
    `explain`)."""
    folder = make_folder(path, what)
    marks, other = (_SWEEP_MARKS, "a sweep's") if kind == "run" else (_RUN_MARKS, "a run's")
    found = [name for name in marks if (folder / name).exists()]
    if found:
        raise UsageError(f"{what} {path}: holds {other} results ({', '.join(found)}); give another folder, or remove them first")
    unrecorded = run_files_without_record(folder) if kind == "run" else []
    if unrecorded:
        raise UsageError(
            f"{what} {path}: holds {', '.join(unrecorded)} but no run.json, so no run wrote them here and a run "
            "would replace them; give another folder, or remove them first"
        )
    return folder


def first_missing(path: str | Path) -> Path | None:
    """The outermost folder of `path` that does not exist yet (None if it all does, or the path
    is one the system cannot take: making it says why): what making it makes, and so what a
    failed run removes (`remove_made`). The path is resolved first, as making it resolves it:
    `tmp/../results` is results, there already when tmp is not."""
    missing = None
    try:
        folder = Path(os.path.realpath(path))  # (not Path.resolve: a symbolic link loop raises there)
    except (OSError, ValueError):  # (ValueError: a NUL in it)
        return None
    while not folder.exists() and not folder.is_symlink() and folder != folder.parent:
        missing, folder = folder, folder.parent
    return missing


def remove_made(out: Path, created: Path) -> None:
    """After a failed run (`roundhouse run --out`, `Simulation.write`): the results folder it
    made (it holds nothing but the unfinished record), and the parents of it the run made, up to
    `created` (`first_missing` before it made them), while they are empty (another run may have
    put its own results beside it meanwhile). Nothing outside `created` goes."""
    folder = Path(os.path.realpath(out))
    if created not in (folder, *folder.parents):  # (not the folder found missing: leave it be)
        return
    shutil.rmtree(folder, ignore_errors=True)
    while folder != created:
        folder = folder.parent
        try:
            folder.rmdir()
        except OSError:  # (not empty, or gone)
            return


def refuse_control_characters(path: str | Path, what: str, kind: str) -> None:
    """A UsageError if `path` holds a control character or a line break (a newline, an escape, a
    tab): every message naming the path would show it otherwise than it is (a terminal obeys an
    escape, a newline splits the message), and such a name is a slip, not a choice."""
    text = str(path)
    at = next((i for i, ch in enumerate(text) if unicodedata.category(ch) in ("Cc", "Zl", "Zp")), None)
    if at is not None:
        raise UsageError(
            f"{what} {text!r}: the {kind} name holds {text[at]!r} (its character {at + 1}), a control character "
            "or line break; give a name without one"
        )


def check_output_file(path: str | Path, what: str) -> Path:
    """A file about to be written (or opened for writing): its folder must exist already (we do
    not create folders for a file named on the command line; a typo would silently make them)."""
    refuse_control_characters(path, what, "file")
    file = Path(path)
    folder = file.parent
    if not folder.is_dir():
        raise UsageError(f"{what} {path}: no folder {folder}")
    if file.is_dir():
        raise UsageError(f"{what} {path}: is a folder, not a file")
    problem = write_problem(file)
    if problem is not None:
        raise UsageError(f"{what} {path}: cannot write there ({problem.strerror})")
    return file


@contextlib.contextmanager
def writing(path: str | Path):
    """Report a failure to write `path` (or a file in it) as a message, not a traceback: for
    what can still go wrong after the checks above (a full disk, a folder where a file goes)."""
    try:
        yield
    except OSError as err:
        raise UsageError(f"error: cannot write {err.filename or path}: {err.strerror or err}") from None


def hold_lock(path: Path, what: str, busy: str) -> int:
    """Hold an exclusive lock on lock file `path` for as long as the descriptor returned is open
    (the kernel releases it when the process dies, however it dies, so a lock file left by a
    killed process blocks no one). The file holds the holder's pid. `what` names the locked
    thing in errors; `busy` is the refusal when another process holds it (`{pid}`: its pid).
    Who removes the file does so while still holding it, so that no one locks a removed file."""
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as err:
            raise UsageError(f"{what}: cannot create its lock file {path}: {err.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise UsageError(busy.replace("{pid}", pid)) from None
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            return fd
        os.close(fd)  # the holder, leaving, removed the file we locked: lock the one there now


def lock_file(path: Path, busy: str, note: Path | None = None) -> int:
    """Hold an exclusive lock on file `path` itself (made, empty, if there is none) for as long
    as the descriptor returned is open. The lock goes with the file, not with its name: a second
    holder finds it locked by whichever path it comes, a symbolic link or a hard link. The
    kernel releases it when the process dies, however it dies. `busy` is the refusal when
    another process holds it (`{pid}`: its pid, from `lock_holder`, else from `note`, a file in
    which the holder writes its pid, for people too; `unlock_file` removes it). A file that
    cannot be opened is the caller's OSError to report. A file removed or replaced while it
    was being locked (its holder, leaving, removed it) is opened again: no one holds a removed
    file. (Whoever closes the descriptor of a file SQLite has open does so after SQLite closed
    it: closing any descriptor of a file drops the process's POSIX locks on it, SQLite's too.
    The lock here is flock's, which SQLite's are not.)"""
    while True:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = lock_holder(fd) or _noted_pid(note) or "unknown"
            os.close(fd)
            raise UsageError(busy.replace("{pid}", pid)) from None
        if _same_file(path, fd):
            break
        os.close(fd)  # (the holder, leaving, removed the file we locked: lock the one there now)
    if note is not None:
        try:
            note.write_text(f"{os.getpid()}\n")
        except OSError:
            pass  # (a note only: the lock is held all the same)
    return fd


def unlock_file(fd: int, note: Path | None = None) -> None:
    """Release `lock_file`'s lock, its note removed first (while still locked, so that the note
    never names a process that no longer holds the lock while another does)."""
    if note is not None:
        note.unlink(missing_ok=True)
    os.close(fd)


def _noted_pid(note: Path | None) -> str:
    try:
        return "" if note is None else note.read_text(errors="replace").strip()[:32]
    except OSError:
        return ""


def _same_file(path: Path, fd: int) -> bool:
    try:
        here, held = os.stat(path), os.fstat(fd)
    except FileNotFoundError:
        return False
    return (here.st_dev, here.st_ino) == (held.st_dev, held.st_ino)


def lock_holder(fd: int) -> str:
    """The pid of the process holding an exclusive flock on the file `fd` is open on, as the
    kernel's table of locks says (Linux's /proc/locks: `1: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE
    0 EOF`, the device in hex); "" where there is no such table or it names none."""
    held = os.fstat(fd)
    device = (os.major(held.st_dev), os.minor(held.st_dev))
    try:
        with open("/proc/locks") as table:
            lines = table.read().splitlines()
    except OSError:
        return ""
    for line in lines:
        fields = line.split()
        if len(fields) < 6 or fields[1:4] != ["FLOCK", "ADVISORY", "WRITE"]:
            continue  # (a waiter's line, `->`, shifts its fields: never ours, we do not wait)
        try:
            major, minor, inode = fields[5].split(":")
            if (int(major, 16), int(minor, 16)) == device and int(inode) == held.st_ino:
                return fields[4]
        except ValueError:
            continue
    return ""
