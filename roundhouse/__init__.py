"""Roundhouse: deep-learning cluster schedulers as Click-style graphs of small typed elements.

The repository's folders (`runtime/`, `elements/`, `traces/`, `tools/`, `agents/`, `wire/`) are this
package's subpackages: `roundhouse/` links to them, so that an installed Roundhouse claims one
name in site-packages (`from roundhouse.runtime.element import element`).
"""

__version__ = "0.1.0"
