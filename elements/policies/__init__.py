"""Priority policies: one module per scheduler family. Each turns the pool's Active jobs into a
Ranking (or, for optimisation policies, Shares)."""

from roundhouse.elements.policies import (  # noqa: F401  # noqa: F401
    dally,
    fifo,
    gavel,  # noqa: F401
    las,
    ones,
    optimus,
    pollux,
    srtf,
    themis,
    tiresias,
)
