"""Where a command's output file is to go, checked before the command does its work (reads a run,
draws its figures): a name that is an extension alone, a folder that does not exist, or a folder
in the file's place would otherwise be found only when the file is written."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from roundhouse.errors import UsageError
from roundhouse.runtime.files import write_problem, writing


def refuse_extension_alone(out: Path, text: str, formats: tuple[str, ...], stem: str, flag: str = "-o") -> None:
    """Refuse `.png`, `.html`: a hidden file's name with no extension, where the user meant the
    format and forgot the name (`stem` is the name the message suggests)."""
    if not out.suffix and out.name[1:].lower() in formats:
        raise UsageError(f"{flag} {text}: names no file before its extension; write e.g. {stem}{out.name}")


def refuse_unwritable_place(out: Path) -> None:
    """Refuse at once an output whose folder does not exist (naming the folder), that is a
    folder, or that cannot be written (`write_problem`: in the words the write would use)."""
    folder = out.parent
    if not folder.is_dir():  # (the folder named: the system's words would say only that no such file is there)
        said = f"{folder} is not a folder" if folder.exists() else f"no folder {folder}"
        raise UsageError(f"error: cannot write {out}: {said}")
    problem = errno.EISDIR if out.is_dir() else None
    if problem is not None:
        with writing(out):
            raise OSError(problem, os.strerror(problem), str(out))
    cannot = write_problem(out)
    if cannot is not None:
        with writing(out):
            raise cannot
