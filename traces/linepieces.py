"""A text trace read a piece of whole lines at a time, so that a large file's text, its lines
and their fields are never all held at once (a million-job Gavel trace is 150 MB of text, and
several times that split into fields).

A reader that checks piece by piece must still name the error that reading the whole file at
once names: the text's own faults first (a byte that is not UTF-8, then a NUL byte, then a
carriage return that ends no line, each the first in the file), then the reader's, in the
order it checks them. `pieces` keeps the first rule: a fault of the text in one piece is
raised only once no later piece holds one that comes before it. `FirstError` keeps the second
for the reader: each error it notes has a rank (the order of the check that found it), and the
one kept is the lowest rank's first in the file.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import attrs

from roundhouse.errors import TraceError
from roundhouse.traces.csvtext import check_line_ends, check_start, check_trace_file, decode_text

# Bytes read at a time: some 25,000 lines of a Gavel trace (smaller pieces are no slower).
PIECE_BYTES = 4 * 2**20


@attrs.frozen
class Piece:
    """Whole lines of a file's text, and the line of the file that the first of them is."""

    text: str
    first_line: int


def pieces(path: str | Path, size: int | None = PIECE_BYTES) -> Iterator[Piece]:
    """The file's text in pieces of whole lines, about `size` bytes each (None: all in one),
    checked as `read_text` and `check_line_ends` check the whole text (no piece is given after
    a fault is found)."""
    path = str(path)
    first_line = 1
    fault = FirstError()
    for data in _line_blocks(path, size):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            decode_text(path, data, first_line)  # (raises, saying where: the first fault of all)
            raise
        if first_line == 1:
            text = text.removeprefix("\ufeff")
        if fault.wants(_NUL) and "\x00" in text:
            fault.note(_NUL, _raised(decode_text, path, data, first_line))
        if fault.wants(_LINE_END) and "\r" in text:
            fault.note(_LINE_END, _raised(check_line_ends, path, text, first_line))
        if fault.error is None:
            yield Piece(text, first_line)
        first_line += data.count(b"\n")
    fault.raise_if_any()


# The text's faults in the order `read_text` and `check_line_ends` find them (a byte that is
# not UTF-8 comes first, and is raised as soon as found).
_NUL, _LINE_END = 0, 1


def _raised(check, *args) -> TraceError | None:
    try:
        check(*args)
    except TraceError as err:
        return err
    return None


def _line_blocks(path: str, size: int | None) -> Iterator[bytes]:
    """The file's bytes in blocks ending at a line's end (the last block: at the file's)."""
    try:
        with open(path, "rb") as f:
            rest = b""
            start = True
            while True:
                block = f.read(-1 if size is None else size)
                if start:
                    check_start(path, block)
                    start = False
                if not block:
                    if rest:
                        yield rest
                    return
                data = rest + block
                cut = _cut(data)
                rest = data[cut:]
                if cut:
                    yield data[:cut]
    except (FileNotFoundError, IsADirectoryError):
        check_trace_file(path)
        raise
    except OSError as err:
        raise TraceError(path, f"cannot be read: {err.strerror or err}") from None


def _cut(data: bytes) -> int:
    """Where to end a block: after its last newline that follows a visible ASCII character
    (with or without a \\r between), 0 if none. So a piece never ends in a run of blank
    characters: whether a \\r there ends no line depends on whether the file goes on after it,
    which the piece cannot tell. A newline never falls inside a UTF-8 character."""
    end = len(data)
    while (at := data.rfind(b"\n", 0, end)) >= 0:
        before = at - 1
        if before >= 0 and data[before] == 0x0D:
            before -= 1
        if before >= 0 and 0x21 <= data[before] <= 0x7E:
            return at + 1
        end = at
    return 0


class FirstError:
    """The error a reader's checks give first: that of the lowest rank (the check made first),
    and of that rank the first noted (pieces are checked in file order)."""

    def __init__(self) -> None:
        self.rank: int | None = None
        self.error: TraceError | None = None

    def wants(self, rank: int) -> bool:
        """Whether an error of `rank` would be kept: a check of a later rank need not run."""
        return self.rank is None or rank < self.rank

    def note(self, rank: int, error: TraceError | None) -> None:
        if error is not None and self.wants(rank):
            self.rank, self.error = rank, error

    def raise_if_any(self) -> None:
        if self.error is not None:
            raise self.error
