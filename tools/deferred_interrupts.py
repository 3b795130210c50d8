"""Holding back interrupts while a short piece of bookkeeping or cleanup runs (tools/loopback.py):
a Ctrl-C taken half-way through starting a process or stopping the ones started would leave a
process running that nothing records, or stop the cleanup with processes still running."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

# SIGTERM too, where Python handles it (a program may turn it into an exception); where it does
# not, it ends the process at once and there is nothing to hold back.
_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Held:
    """The signals that arrived while held back, in order (a caller may hurry when one did)."""

    def __init__(self) -> None:
        self.signals: list[int] = []


@contextmanager
def deferred_interrupts() -> Iterator[Held]:
    """Run the block with SIGINT (and SIGTERM, if Python handles it) held back: each that
    arrives is noted, and delivered to the handler there was before once the block is done
    (KeyboardInterrupt then, for a Ctrl-C), however the block ends. Python runs signal handlers
    in the main thread only, so elsewhere nothing is held back, as nothing would interrupt."""
    held = Held()
    if threading.current_thread() is not threading.main_thread():
        yield held
        return

    def note(signum: int, frame: object) -> None:
        held.signals.append(signum)

    previous = {}
    try:
        for sig in _SIGNALS:
            handler = signal.getsignal(sig)
            if callable(handler):
                previous[sig] = signal.signal(sig, note)
        yield held
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for signum in dict.fromkeys(held.signals):  # (each once: a third Ctrl-C means what the second did)
            signal.raise_signal(signum)
