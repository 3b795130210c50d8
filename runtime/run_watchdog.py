"""A sweep's run stopped where it is: when it has used up its time (`--timeout`), or when its
sweep was interrupted, an exception delivered into the thread running it (`Watchdog`), the run
recorded as timed out or stopped (runtime/sweep.py, `record_run`)."""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable


class RunTimeout(BaseException):
    """Raised inside a run that has used up its time. A BaseException, so that no element's
    `except Exception` can swallow it and the engine does not report it as the element's fault."""


class RunStopped(BaseException):
    """Raised inside a run whose sweep was interrupted (a BaseException, as RunTimeout)."""


# How often a run asks whether its sweep was interrupted (when it can be: on Dask).
STOP_POLL_S = 0.5
# How often a run's timeout or stop is delivered again while the run goes on (the last was dropped).
REDELIVER_S = 0.5


class Watchdog:
    """Raises RunTimeout in the thread that made it once `seconds` have passed, or RunStopped
    once `stopped()` says so (asked every STOP_POLL_S), while that thread is inside `run`.

    The exception is delivered between two Python bytecodes of that thread, so it stops a run
    whatever it is doing in Python (a Dask worker runs tasks in threads, where no signal
    arrives); a long call into compiled code ends first. It is delivered only while `run`'s
    body runs, never into what the thread does before or after (a Dask worker's own code, its
    next task), and again every REDELIVER_S while the body goes on: one that lands in a callback
    whose exceptions Python drops (a garbage collector callback, as Dask's workers have) is lost.
    A body that ends all the same is reported by `run`, as stopped."""

    def __init__(self, seconds: float | None, stopped: Callable[[], bool] | None = None):
        self._thread_id = threading.get_ident()
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._active = False  # (inside `run`'s body: where deliveries may land)
        self._over = False  # (`run` has ended: the watchdog's threads end too)
        self.fired: type[BaseException] | None = None
        self._timer = None
        if stopped is not None:
            threading.Thread(target=self._poll, args=(stopped,), daemon=True).start()
        if seconds is not None:
            self._timer = threading.Timer(seconds, self._fire, (RunTimeout,))
            self._timer.daemon = True
            self._timer.start()

    def run(self, body: Callable[[], object]) -> type[BaseException] | None:
        """Run `body()` once; None, or what was fired at it if it ended normally all the same
        (the delivery dropped, or it came as the body returned). Nothing is delivered after."""
        try:
            with self._lock:
                self._active = True
                fired = self.fired
            if fired is not None:  # (fired before the body began)
                raise fired
            body()
        finally:
            with self._lock:
                # (Plain stores before any call: a delivery made as the body ended lands at the
                # first call, and the watchdog's threads must see the run over all the same.)
                self._active = False
                self._over = True
                self._done.set()
                if self._timer is not None:
                    self._timer.cancel()
                if self.fired is not None:  # (one not yet delivered: take it back)
                    self._deliver(None)
        return self.fired

    def _poll(self, stopped: Callable[[], bool]) -> None:
        while not self._done.wait(STOP_POLL_S) and not self._over:
            try:
                if stopped():
                    self._fire(RunStopped)
                    return
            except Exception:  # (no answer this time: ask again; the timeout holds regardless)
                continue

    def _fire(self, exception: type[BaseException]) -> None:
        with self._lock:
            if self.fired is not None or self._over:
                return
            self.fired = exception
        while True:
            with self._lock:
                if self._over:
                    return
                if self._active:
                    self._deliver(exception)
            if self._done.wait(REDELIVER_S):
                return

    def _deliver(self, exception: type[BaseException] | None) -> None:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(
            ctypes.c_ulong(self._thread_id), ctypes.py_object(exception) if exception is not None else None
        )
