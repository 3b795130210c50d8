"""Adding the same step many times over, to the same bits as adding it once a round.

Event skipping passes quiet rounds without ticking them, and what those rounds add (the
clock's round, each running job's progress) must come out as round-by-round additions would:
floating-point sums depend on their order, and results are identical with skipping on and off.
A Python loop of additions costs about a tenth of a microsecond a round, which is minutes for
a run of millisecond rounds over days. `np.add.accumulate` adds in order, one element after
the other (not pairwise, as `np.sum` does), so its running sums are the loop's, bit for bit,
at about a nanosecond each. Few additions stay in a loop, cheaper than building arrays."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

# Up to this many additions, a loop (no arrays to build); beyond, running sums in blocks of at
# most `_BLOCK` numbers (a few hundred kB at a time, whatever the count).
_LOOP_AT_MOST = 16
_BLOCK = 1 << 15


def running_sums(start: float, step: float, times: int) -> Iterator[np.ndarray]:
    """`start + step`, then `+ step` again, ... `times` sums in all, in blocks (each the
    sums a loop adding `step` one at a time reaches, in order)."""
    size = 64  # (small first: a caller looking for the first sum past a bound often stops early)
    last = start
    while times > 0:
        n = min(size, times, _BLOCK)
        block = np.full(n + 1, step)
        block[0] = last
        sums = np.add.accumulate(block)[1:]
        yield sums
        last, times, size = sums[-1], times - n, size * 2


def add_repeatedly(total: np.ndarray, step: np.ndarray, times: int) -> None:
    """`total += step`, `times` times over, in place: the same bits as the loop."""
    if times <= _LOOP_AT_MOST or total.size * _LOOP_AT_MOST > _BLOCK:
        # (few additions, or arrays so large that a block would hold few rounds: the loop's
        # cost is then the additions themselves)
        for _ in range(times):
            total += step
        return
    last, increment = total.ravel(), np.broadcast_to(step, total.shape).ravel()
    rounds = _BLOCK // max(1, last.size)
    while times > 0:
        n = min(rounds, times)
        block = np.empty((n + 1, last.size))
        block[0] = last
        block[1:] = increment
        last = np.add.accumulate(block, axis=0)[-1]
        times -= n
    total[...] = last.reshape(total.shape)


def repeated_sum(start: float, step: float, times: int) -> float:
    """`start` with `step` added `times` times over, one at a time: the loop's float."""
    if times <= _LOOP_AT_MOST:
        for _ in range(times):
            start += step
        return start
    for sums in running_sums(start, step, times):
        start = float(sums[-1])
    return start


def add_repeatedly_each(total: np.ndarray, step: np.ndarray, times: np.ndarray) -> None:
    """`total[..., i] += step[..., i]`, `times[i]` times over for each i (the last axis), in
    place: the same bits as the loop. Past its count a column adds 0.0, which leaves every sum
    as it is (the books are never -0.0), so one running sum serves columns of any counts: in
    blocks of rounds, over the columns with rounds left (longest first)."""
    if not len(times):
        return
    order = np.argsort(-times, kind="stable")
    counts = times[order]
    last = total[..., order].reshape(-1, len(order))
    increment = np.broadcast_to(step, total.shape)[..., order].reshape(-1, len(order))
    done, upto = 0, int(counts[0])
    while done < upto:
        live = int(np.count_nonzero(counts > done))  # (a prefix: the longest first)
        n = min(upto - done, max(1, _BLOCK // (live * len(last))))
        block = np.empty((n + 1, len(last), live))
        block[0] = last[:, :live]
        within = (done + np.arange(n))[:, None] < counts[:live]  # (rounds within a column's count)
        np.multiply(increment[:, :live], within[:, None, :], out=block[1:])  # (times 1 or 0: exact)
        last[:, :live] = np.add.accumulate(block, axis=0)[-1]
        done += n
    total[..., order] = last.reshape(total[..., order].shape)


class SumsFromZero:
    """The running sums 0, s, s + s, ... of many steps s, the loop's bits (`np.add.accumulate`),
    a row a step: row i's column k is the sum after k additions. The rows are all as long as the
    longest asked for so far (`reach`), at most `longest` sums."""

    def __init__(self, longest: int) -> None:
        self.longest = longest
        self._row: dict[float, int] = {}
        self._steps = np.zeros(8)
        self.sums = np.zeros((8, min(64, longest)))

    def __len__(self) -> int:
        return len(self._row)

    def rows_of(self, steps: list[float]) -> np.ndarray:
        """The row of each step's sums (added where new)."""
        get = self._row.get
        rows = [get(s) for s in steps]
        if None in rows:
            for i, s in enumerate(steps):
                if rows[i] is None:
                    row = get(s)
                    rows[i] = self._add(s) if row is None else row
        return np.array(rows, dtype=np.int64)

    def _add(self, s: float) -> int:
        row = len(self._row)
        if row == len(self._steps):  # (room doubled: amortised)
            self._steps = np.concatenate([self._steps, np.zeros(row)])
            self.sums = np.concatenate([self.sums, np.zeros_like(self.sums)])
        self._steps[row] = s
        sums = self.sums[row]
        sums[0], sums[1:] = 0.0, s
        with np.errstate(over="ignore"):  # (past the largest float, inf, as the loop's)
            np.add.accumulate(sums, out=sums)
        self._row[s] = row
        return row

    def reach(self, length: int) -> None:
        """Make the rows at least `length` sums long (up to `longest`), each going on from its
        last sum with the same additions."""
        have = self.sums.shape[1]
        if length <= have:
            return
        length = min(max(length, 2 * have), self.longest)
        sums = np.empty((len(self._steps), length))
        sums[:, :have] = self.sums
        more = sums[:, have - 1 :]
        more[:, 1:] = self._steps[:, None]
        with np.errstate(over="ignore"):  # (in order along each row: the loop's sums)
            np.add.accumulate(more, axis=1, out=more)
        self.sums = sums
