"""The element library, one module per family (DESIGN §1). Importing it registers every class."""

from elements import admission, launch, placement, policies, pool, sinks, sources  # noqa: F401
from elements import placement_intranode, placement_tiresias, termination  # noqa: F401
from elements import objectives  # noqa: F401
