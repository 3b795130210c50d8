"""A live cluster on loopback for tests (tools/loopback.py), with the journal read as the tests
need it. Every wait has a timeout; the fixtures' teardown calls `close()`, which kills every
process started, by process id."""

from __future__ import annotations

import subprocess
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

from roundhouse.tools.loopback import Loopback, free_port  # noqa: F401  (free_port: for tests that bind themselves)

# Throughputs of the example workloads on one CPU core, roughly, with several running at once:
# the agents in tests emulate their GPUs at these speeds (on a slower machine jobs run slower).
TEST_PROFILE = """model,batch_size,gpu_type,gpus,placement,iters_per_s
ResNet-18,16,V100,1,consolidated,80
ResNet-18,16,V100,2,consolidated,60
LM,10,V100,1,consolidated,200
LM,10,V100,2,consolidated,120
Recommendation,64,V100,1,consolidated,150
Recommendation,64,V100,2,consolidated,100
"""


def wait_until(
    check: Callable[[], object], timeout: float, what: str, detail: Callable[[], str] = lambda: "", every: float = 0.05
):
    """Wait for `check()` to hold, asking every `every` s, for at most `timeout` s; an
    AssertionError naming `what` (and `detail()`, say a log) if it never does. For what another
    process or thread updates in its own time: asked once, it may not have happened yet."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}\n{detail()}")
        time.sleep(every)


def stop(process: subprocess.Popen, timeout: float = 30.0) -> None:
    """Stop a process a test started: SIGTERM, then SIGKILL if it has not exited in `timeout`
    (a test that failed half-way must not leave an agent behind for the tests after it)."""
    if process.poll() is None:
        process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


# Every cluster made and not yet closed by its test: a test that fails before its own `close()`
# (in a helper that starts a cluster and waits for a job, say) would leave its agents running;
# tests/conftest.py closes what is left after each test.
left_open: list[LiveCluster] = []


def close_left_open() -> None:
    while left_open:
        left_open.pop().close()


class LiveCluster(Loopback):
    def __init__(self, folder: Path, graph: str, files: dict[str, str] | None = None, **options):
        left_open.append(self)
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "graph.sched").write_text(textwrap.dedent(graph))
        for name, text in (files or {}).items():
            (folder / name).write_text(text)
        super().__init__(folder, folder / "graph.sched", **options)

    # Agents in tests emulate their GPUs: jobs train at the profile's speeds (TEST_PROFILE), so
    # that what is still running when a test acts does not depend on the machine's speed.
    emulate_agents = True

    def wait_for(self, check, timeout: float, what: str) -> None:
        try:
            super().wait_for(check, timeout, what)
        except TimeoutError as err:
            raise AssertionError(str(err)) from None

    def wait_exit(self, name: str, timeout: float) -> int:
        try:
            return super().wait_exit(name, timeout)
        except TimeoutError as err:
            raise AssertionError(str(err)) from None

    def attempts(self) -> dict[int, list[tuple]]:
        rows = self.query(
            "SELECT job_id, attempt, start_iteration, outcome, end_iteration, checkpoint_iteration, resume "
            "FROM attempts ORDER BY job_id, attempt"
        )
        out: dict[int, list[tuple]] = {}
        for r in rows:
            out.setdefault(r[0], []).append(r[1:])
        return out

    def exits(self) -> list[tuple]:
        return self.query(
            "SELECT job_id, attempt, rank, node, outcome, iteration, checkpoint_iteration FROM exits ORDER BY job_id, attempt, rank"
        )


def started_backend(tmp_path: Path, world):
    """A live scheduler backend started on a free loopback port, in 0.2 s rounds, for tests that
    play its agents themselves (stand-ins, or a real agent they start): heartbeats every 0.2 s, a
    long timeout, no retries, rendezvous ports from a free range. Returns it, its address and its
    journal."""
    from roundhouse.runtime.backends.live import LiveBackend, LiveOptions
    from roundhouse.runtime.journal import Journal
    from roundhouse.wire.security import ServerSecurity

    address = f"tcp://127.0.0.1:{free_port()}"
    journal = Journal(tmp_path / "j.sqlite")
    base = free_port()
    options = LiveOptions(
        heartbeat_s=0.2,
        heartbeat_timeout_s=60.0,
        max_retries=0,
        wait_for_agents_s=0.0,
        checkpoint_dir=str(tmp_path / "ck"),
        ports=(base, base + 20),
    )
    meta = {"graph_digest": "x", "cluster": "c", "round_s": 0.2}
    backend = LiveBackend(world, 0.2, address, ServerSecurity(None), journal, options, meta)
    backend.start()
    return backend, address, journal
