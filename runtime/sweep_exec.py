"""Where a sweep's runs execute: worker processes on this machine, or a Dask cluster.

Both take (key, spec) tasks and yield one row per task as runs finish, in whatever order they
finish: a run's result, or the record of its failure. Whatever happens to a run (it raises, it
times out, its process dies), its row comes back and the other runs go on.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterator
from multiprocessing.connection import wait
from typing import Any

import attrs

from roundhouse.errors import UsageError, first_line
from roundhouse.runtime.run_watchdog import STOP_POLL_S
from roundhouse.runtime.sweep import RunSpec, base_row, record_run, worker_name

# How long past its timeout a local run may go on (it should have stopped itself by then: see
# Watchdog) before its process is killed: a run stuck in compiled code stops all the same.
KILL_GRACE_S = 5.0
# How long a local worker whose pipe closed may take to exit, so that its own exit status is reported.
EXIT_GRACE_S = 1.0
# How long a local worker may take to start (a fresh interpreter importing Roundhouse: seconds on
# a busy machine or a slow shared file system) and take up its run, over the run's own timeout,
# before it is taken for stuck and killed. A run's timeout counts from when its worker takes it up.
START_GRACE_S = 60.0
# What a local worker sends when it takes up a run, before the run's row.
_TAKEN = "taken"
# How long to wait for a Dask scheduler to answer before saying that it does not.
DASK_CONNECT_TIMEOUT_S = 10.0


@attrs.frozen
class Task:
    key: str
    spec: RunSpec


# --- on this machine ------------------------------------------------------------------------


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()  # (signals are set there only)


def _watch_parent(parent: int) -> None:
    """End this worker when the sweep that started it is gone (killed, so that it could not say)."""
    while True:
        time.sleep(1.0)
        if os.getppid() != parent:
            os._exit(1)


def _worker_main(conn, timeout: float | None, parent: int) -> None:
    # Ctrl-C goes to the whole process group; the sweep decides what stops, and stops us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    while True:
        try:
            task = conn.recv()
        except EOFError:
            return
        if task is None:
            return
        try:
            conn.send(_TAKEN)  # (its timeout counts from now, not from when the task was sent)
            conn.send(record_run(task.spec, task.key, timeout))
        except (BrokenPipeError, EOFError):
            return


@attrs.define
class _Slot:
    process: Any
    conn: Any
    task: Task | None = None
    started: float = 0.0  # when the task was sent, then when the worker took it up
    taken: bool = False

    def deadline(self, timeout: float) -> float:
        """When this slot's run is overdue: its process is then killed."""
        return self.started + timeout + KILL_GRACE_S + (0.0 if self.taken else START_GRACE_S)


class LocalExecutor:
    """Worker processes on this machine, one run each at a time. Each is a fresh interpreter
    (spawned, not forked: forking a process whose polars thread pool has started can deadlock
    the child), reused from run to run; one that dies or overstays is replaced."""

    def __init__(self, workers: int | None = None):
        self.workers = workers or os.cpu_count() or 1
        self._context = multiprocessing.get_context("spawn")

    def where_for(self, runs: int) -> str:
        """Where `runs` runs go: as many worker processes as there are runs, at most `workers`."""
        n = min(self.workers, runs)
        return f"{n:,} local worker process{'es' if n != 1 else ''}"

    def _start(self, timeout: float | None) -> _Slot:
        ours, theirs = self._context.Pipe()
        process = self._context.Process(target=_worker_main, args=(theirs, timeout, os.getpid()), daemon=True)
        # A new interpreter takes an ignored SIGINT as ignored from its first instruction: Ctrl-C
        # while it imports (before it could ignore the signal itself) would print its traceback.
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if _in_main_thread() else None
        try:
            process.start()
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
        theirs.close()
        return _Slot(process, ours)

    def run(self, tasks: list[Task], timeout: float | None = None) -> Iterator[dict[str, Any]]:
        queue = deque(tasks)
        slots = [self._start(timeout) for _ in range(min(self.workers, len(tasks)))]

        def assign(slot: _Slot) -> None:
            slot.task = queue.popleft() if queue else None
            slot.taken = False
            if slot.task is not None:
                slot.started = time.monotonic()
                slot.conn.send(slot.task)

        try:
            for slot in slots:
                assign(slot)
            while any(s.task is not None for s in slots):
                busy = [s for s in slots if s.task is not None]
                wait_s = None
                if timeout is not None:
                    wait_s = max(0.0, min(s.deadline(timeout) for s in busy) - time.monotonic())
                ready = set(wait([s.conn for s in busy] + [s.process.sentinel for s in busy], timeout=wait_s))
                for i, slot in enumerate(slots):
                    task = slot.task
                    if task is None:
                        continue
                    row = None
                    if slot.conn in ready:
                        try:
                            row = slot.conn.recv()
                        except (EOFError, OSError):
                            row = None
                    if row == _TAKEN:
                        slot.started, slot.taken = time.monotonic(), True
                        continue
                    if row is not None:
                        assign(slot)
                        yield row
                        continue
                    overdue = timeout is not None and time.monotonic() > slot.deadline(timeout)
                    if slot.process.sentinel in ready or slot.conn in ready or overdue:
                        if not overdue:  # (its pipe closes a moment before it exits: let it say how it ended)
                            slot.process.join(timeout=EXIT_GRACE_S)
                        slot.process.kill()
                        slot.process.join()
                        # (The row names the worker process that ran the run, not this one.)
                        worker = worker_name(slot.process.pid)
                        if overdue:
                            assert timeout is not None  # (only a run with a timeout is overdue)
                            failure = base_row(
                                task.spec,
                                task.key,
                                "timeout",
                                f"timed out after {timeout:g} s (its process was killed)"
                                if slot.taken
                                else f"its worker process had not started it {slot.deadline(timeout) - slot.started:g} s "
                                "after it was sent (its process was killed)",
                                worker=worker,
                            )
                        else:
                            failure = base_row(
                                task.spec,
                                task.key,
                                "error",
                                f"its worker process died (exit status {slot.process.exitcode})",
                                worker=worker,
                            )
                        slots[i] = self._start(timeout)
                        assign(slots[i])
                        yield failure
        finally:
            for slot in slots:
                try:
                    slot.conn.send(None)
                except OSError:
                    pass
            for slot in slots:
                slot.process.join(timeout=1.0 if slot.task is None else 0)
                if slot.process.is_alive():
                    slot.process.kill()
                    slot.process.join()

    def close(self) -> None:
        pass


# --- on a Dask cluster ------------------------------------------------------------------------


class DaskExecutor:
    """The workers of a running Dask cluster, given its scheduler's address. Dask moves a run
    whose worker dies to another worker (up to its `allowed-failures` times); a row comes back
    once per run whatever happens, and only the sweep (this process) writes the results store."""

    def __init__(self, address: str, connect_timeout: float = DASK_CONNECT_TIMEOUT_S):
        try:
            import distributed
        except ImportError:
            raise UsageError("--dask: Dask's distributed package is not installed: pip install 'roundhouse[dask]'") from None
        self._distributed = distributed
        self.address = address
        _check_address(address)
        self.client = _connect(distributed, address, connect_timeout)
        workers = self.client.scheduler_info().get("workers", {})
        self._where = f"the Dask cluster at {address} ({len(workers):,} worker{'s' if len(workers) != 1 else ''} now)"

    def where_for(self, runs: int) -> str:
        """Where `runs` runs go (the cluster spreads them over its workers)."""
        return self._where

    def run(self, tasks: list[Task], timeout: float | None = None) -> Iterator[dict[str, Any]]:
        sweep = uuid.uuid4().hex[:8]  # tasks of two sweeps never share a Dask key
        # Set when the sweep stops early: its runs under way see it and stop (cancelling a
        # task does not stop one that has started).
        stop = self._distributed.Event(f"roundhouse-stop-{sweep}", client=self.client)
        futures = {}
        try:
            for task in tasks:
                future = self.client.submit(
                    _record_on_dask,
                    task.spec,
                    task.key,
                    timeout,
                    stop.name,
                    key=f"roundhouse-run-{sweep}-{task.key[:16]}",
                    pure=False,
                )
                futures[future] = task
            for future in self._distributed.as_completed(list(futures), loop=self.client.loop):
                task = futures.pop(future)
                try:
                    row = future.result()
                except Exception as err:  # the run never reported: its worker died, or Dask gave up on it
                    row = base_row(task.spec, task.key, "error", _dask_failure(err), worker=_last_worker(err))
                future.release()
                yield row
        finally:
            if futures:
                try:
                    stop.set()
                finally:
                    self.client.cancel(list(futures))
                # Once the runs under way have had time to see it (they ask every STOP_POLL_S),
                # the event goes: the Dask scheduler would keep it for as long as it runs.
                time.sleep(3 * STOP_POLL_S)
                with contextlib.suppress(Exception):
                    stop.clear()

    def close(self) -> None:
        # (A client whose scheduler went away logs the end of its attempts to reconnect, with a
        # traceback, as it closes: the rows of the runs lost say what happened.)
        with _quiet_dask_logs():
            self.client.close()


@contextlib.contextmanager
def _quiet_dask_logs() -> Iterator[None]:
    """Dask's client and comms log nothing but their critical errors while this lasts."""
    loggers = [logging.getLogger(name) for name in ("distributed.client", "distributed.comm", "distributed.core")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def _connect(distributed, address: str, timeout: float):
    """A Dask client of the scheduler at `address`; UsageError, saying why, if none can be had.
    A client that failed to connect is closed at once: left to the garbage collector, it would
    try to say goodbye to a scheduler it never reached, for 20 s, with a traceback."""
    made = []

    class _Client(distributed.Client):  # (only to keep hold of a client its own start fails)
        def start(self, **kwargs):
            made.append(self)
            return super().start(**kwargs)

    try:
        return _Client(address, timeout=timeout, set_as_default=False)
    except Exception as err:
        for client in made:
            with contextlib.suppress(Exception):
                client.close(timeout=2)
        raise UsageError(f"--dask {address}: {_connect_failure(address, err, timeout)}") from None


def _connect_failure(address: str, err: BaseException, timeout: float) -> str:
    """Why no client of the scheduler at `address` could be had, in a sentence."""
    scheme = address.partition("://")[0].lower() if "://" in address else "tcp"
    if scheme in ("tls", "wss") and "ssl" in str(err).lower():
        return (
            "a TLS connection needs Dask's TLS settings (certificates and keys), set in Dask's configuration "
            f"(distributed.comm.tls in ~/.config/dask/*.yaml, or DASK_DISTRIBUTED__COMM__TLS__... variables): {first_line(err)}"
        )
    if isinstance(err, (OSError, TimeoutError)):
        return f"no Dask scheduler answered within {timeout:g} s ({first_line(err)})"
    return f"cannot connect to a Dask scheduler there ({type(err).__name__}: {first_line(err)})"


def _record_on_dask(spec: RunSpec, key: str, timeout: float | None, stop: str) -> dict[str, Any]:
    """`record_run` in a Dask worker's task: it stops early once the Dask event `stop` is set."""
    import distributed

    event = distributed.Event(stop)  # (its client is the worker's own, found here in the task)
    if event.client is None:
        return record_run(spec, key, timeout)
    return record_run(spec, key, timeout, stopped=event.is_set)


def _check_address(address: str) -> None:
    """Refuse an address Dask could not connect to in any case, before trying (a Client given
    one fails only after its own timeouts, with a traceback at exit)."""
    from distributed.comm import parse_address
    from distributed.comm.addressing import parse_host_port
    from distributed.comm.registry import backends

    try:
        scheme, location = parse_address(address)
        if scheme == "inproc":
            raise ValueError("inproc:// reaches a scheduler within one Python process only, not another program's")
        if scheme == "ucx":
            raise ValueError("ucx:// needs UCX and Dask's UCX support, which this sweep does not use; give its tcp:// address")
        if scheme not in backends:
            raise ValueError(f"unknown scheme '{scheme}' (known: {', '.join(sorted(backends))})")
        if scheme in ("tcp", "tls", "ws", "wss"):
            try:
                host, port = parse_host_port(location)  # (a port given: a bare word is no address)
            except ValueError as err:
                if "invalid literal" not in str(err):
                    raise
                raise ValueError(f"its port '{location.rpartition(':')[2]}' is not a number") from None
            if not host:
                raise ValueError("no host")
            if not 0 < port < 65536:
                raise ValueError(f"its port {port} is not one of 1 to 65535")
            try:
                socket.getaddrinfo(host, port)
            except OSError:
                raise ValueError(f"no such host '{host}'") from None
    except ValueError as err:
        raise UsageError(f"--dask {address}: not a scheduler address ({err}); write e.g. tcp://host:8786") from None


def _last_worker(err: BaseException) -> str | None:
    """The Dask worker a run that never reported was last given to, by its address (the Dask
    workers running it died too often: Dask's KilledWorker says which was the last), or None."""
    address = getattr(getattr(err, "last_worker", None), "address", None) if type(err).__name__ == "KilledWorker" else None
    return address if isinstance(address, str) else None


def _dask_failure(err: BaseException) -> str:
    if type(err).__name__ == "KilledWorker":
        return f"the Dask workers running it died too often (Dask's allowed-failures): {first_line(err)}"
    if type(err).__name__ == "FutureCancelledError":  # (Dask gave it up: its scheduler was lost, say)
        reason = getattr(err, "reason", None) or "no reason given"
        return (
            f"Dask cancelled it before it finished ({reason}: is the Dask scheduler still up?); "
            "run the same command to run it again"
        )
    return f"{type(err).__name__}: {first_line(err)}"
