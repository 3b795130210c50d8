"""The element library, one module per family (DESIGN §1). Importing it registers every class."""

from roundhouse.elements import (  # noqa: F401  # noqa: F401
    admission,
    control,
    launch,
    objectives,  # noqa: F401
    placement,
    policies,
    pool,
    sinks,
    sources,
    termination,
    usage,
)
