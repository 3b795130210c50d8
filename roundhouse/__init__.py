"""Roundhouse: deep-learning cluster schedulers as Click-style graphs of small typed elements.

The repository's folders (`runtime/`, `elements/`, `traces/`, `tools/`, `agents/`, `wire/`) are this
package's subpackages: `roundhouse/` links to them, so that an installed Roundhouse claims one
name in site-packages (`from roundhouse.runtime.element import element`).
"""

__version__ = "0.1.0"

__all__ = ["Simulation", "__version__"]


def __getattr__(name: str):
    # `roundhouse.Simulation` (runtime/simulation.py), imported on first use: `import roundhouse`
    # alone stays cheap.
    if name == "Simulation":
        from roundhouse.runtime.simulation import Simulation

        return Simulation
    raise AttributeError(f"module 'roundhouse' has no attribute {name!r}")
