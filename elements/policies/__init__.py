"""Priority policies: one module per scheduler family. Each turns the pool's Active jobs into a
Ranking (or, for optimisation policies, Shares)."""

from elements.policies import fifo, las, srtf  # noqa: F401
from elements.policies import optimus, themis, tiresias  # noqa: F401
from elements.policies import gavel  # noqa: F401
