"""Repeated additions of one float step worked out binade by binade: the bits of the loop
`x += s`, k times over, in a few operations per binade the sum passes rather than one per
addition.

Within one binade [2**e, 2**(e+1)) the floats are the multiples of u = 2**(e-52) (below
2**-1021, the subnormals included, of 2**-1074). For x on that grid and fl(x + s) in the same
binade, fl(x + s) = x + R*u where R is s/u (exact: u is a power of two) rounded to the nearest
integer; a tie (s/u a half-integer) rounds to the even last bit of the result, so from an even
multiple every addition adds n + (n odd) for s/u = n + 1/2. So additions inside a binade are
additions of whole numbers of u, exact in float, and their count before the sum would leave
the binade is a division; the addition that crosses into the next binade, and any addition to
an x below s (the sum's binade is above x's), are done in float, as the loop does them. R = 0
(s at most half a u) stalls the sum, as the loop does. Domain: x >= 0 (not -0.0) and s >= 0,
finite (the books and steps of running jobs); callers keep the loop for anything else.
"""

from __future__ import annotations

import math
from bisect import bisect_right

import numpy as np

_TOP = (1 << 53) - 1  # (the largest multiple of u inside a binade)
_MIN_E = -1022  # (the subnormals share the grid of the lowest normal binade)


def in_domain(x: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Whether the sums of `s` from `x` are worked out here, elementwise."""
    return np.isfinite(x) & np.isfinite(s) & (x >= 0) & ~np.signbit(x) & (s >= 0)  # (-0.0 + 0.0 is 0.0)


class Segments:
    """The running sums x0, x0 + s, ... of one step, up to `most` additions, as pieces: from
    addition K[i] the sum is X[i] + (k - K[i]) * D[i] (exact: whole numbers of one binade's u),
    up to the next piece's first addition (a piece of one addition, done in float, has D 0)."""

    def __init__(self, x0: float, s: float, most: int):
        K, X, D = [], [], []
        k, x = 0, float(x0)
        while k <= most:
            K.append(k)
            X.append(x)
            if x < s or not math.isfinite(x):  # (the sum leaves x's binade: in float)
                D.append(0.0)
                x, k = (x + s, k + 1) if math.isfinite(x) else (x, most + 1)
                continue
            e = max(math.frexp(x)[1] - 1, _MIN_E)
            a = int(math.ldexp(x, 52 - e))
            q = math.ldexp(s, 52 - e)  # (s <= x < 2**(e+1): below 2**53, exact)
            n = math.floor(q)
            if q - n != 0.5:
                r = n + (q - n > 0.5)
            elif a & 1:  # (a tie from an odd multiple: one addition in float makes it even)
                D.append(0.0)
                x, k = x + s, k + 1
                continue
            else:
                r = n + (n & 1)
            if r == 0:  # (the sum stalls for good)
                D.append(0.0)
                break
            m = (_TOP - a) // r  # additions that stay inside the binade
            if m == 0:
                D.append(0.0)
                x, k = x + s, k + 1
                continue
            d = math.ldexp(float(r), e - 52)
            D.append(d)
            x, k = x + m * d + s, k + m + 1  # (then the addition that crosses, in float)
        self.K, self.X, self.D = K, X, D

    def at(self, k: int) -> float:
        """The sum after k additions (k up to `most`)."""
        i = bisect_right(self.K, k) - 1
        return self.X[i] + (k - self.K[i]) * self.D[i]

    def first_reaching(self, target: float) -> int:
        """About the first k whose sum reaches `target` (an estimate: exact up to the pieces'
        rounding of the division; a large number when the sums never reach it)."""
        i = bisect_right(self.X, target) - 1
        if i < 0:
            return 0
        d = self.D[i]
        if i + 1 < len(self.K):
            if d == 0.0:
                return self.K[i + 1]
            return min(self.K[i] + math.ceil((target - self.X[i]) / d), self.K[i + 1])
        return self.K[i] + math.ceil((target - self.X[i]) / d) if d > 0 else 1 << 62

    def around(self, target: float, last: int) -> tuple[int, float, float]:
        """k, the estimate of `first_reaching(target)` kept within 0 .. `last`, and the sums
        after k - 1 (after 0 where k is 0) and k additions."""
        k = min(max(self.first_reaching(target), 0), last)
        return k, self.at(max(k - 1, 0)), self.at(k)


def add_repeatedly_exact(total: np.ndarray, step: np.ndarray, times: np.ndarray) -> None:
    """`total[i] += step[i]`, `times[i]` times over, in place (1-d arrays in `in_domain`):
    the loop's bits, binade by binade for all at once."""
    x, s, left = total.astype(float), np.asarray(step, dtype=float), np.asarray(times).astype(np.int64)
    live = (left > 0).nonzero()[0]
    while len(live):
        live = live[np.isfinite(x[live])]  # (a sum that overflowed stays infinite)
        xs, ss, ls = x[live], s[live], left[live]
        below = xs < ss
        e = np.maximum(np.frexp(xs)[1] - 1, _MIN_E)
        a = np.ldexp(xs, 52 - e).astype(np.int64)
        q = np.ldexp(np.where(below, 0.0, ss), 52 - e)  # (s <= x: below 2**53, exact)
        n = np.floor(q).astype(np.int64)
        frac = q - n
        tie = frac == 0.5
        r = np.where(tie, n + (n & 1), n + (frac > 0.5))
        single = below | (tie & ((a & 1) == 1))  # (one addition in float)
        r = np.where(single, 1, r)  # (placeholders: those add in float below)
        m = np.where(single, 0, np.minimum((_TOP - a) // np.maximum(r, 1), ls))
        stalled = ~single & (r == 0)
        xs = xs + m * np.ldexp(r.astype(float), e - 52)  # (whole numbers of u: exact)
        ls = ls - m
        more = ~stalled & (ls > 0)  # (then one addition in float: the one that crosses, or the single)
        xs[more] += ss[more]
        ls[more] -= 1
        ls[stalled] = 0
        x[live], left[live] = xs, ls
        live = live[ls > 0]
    total[...] = x
