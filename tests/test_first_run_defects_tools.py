"""Defects found using the sweep, what-if, plot and reproduce commands as a user would."""

from __future__ import annotations

import gc
import threading
import time
import warnings
from pathlib import Path

import pytest

from roundhouse.runtime import registry
from roundhouse.runtime.sweep import RunSpec, compile_spec, record_run

ROOT = Path(__file__).resolve().parents[1]


class _Swallower:
    """A garbage collector callback that, once armed, runs Python code for `hold_s` on its first
    call: a timeout delivered meanwhile lands in it, and the interpreter prints and drops it, as
    it does with one landing in a Dask worker's GC callback (`distributed.gc.GCDiagnosis`)."""

    def __init__(self, hold_s: float):
        self.hold_s = hold_s
        self.calls = 0

    def __call__(self, phase: str, info: dict) -> None:
        self.calls += 1
        if self.calls != 1:
            return
        until = time.monotonic() + self.hold_s
        while time.monotonic() < until:
            pass


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_timeout_dropped_by_a_gc_callback_still_ends_the_run():
    """A run's timeout is an exception delivered to its thread; one that lands in a callback
    whose exceptions the interpreter drops (a garbage collector callback, as Dask's workers
    have) was lost: the run went on to its end and was recorded `ok`, past its --timeout (on
    Dask, with no process to kill, a long run was never stopped)."""
    spec = RunSpec(str(ROOT / "graphs" / "las.sched"))  # (the whole trace: a few seconds)
    with registry.scope():
        key = compile_spec(spec)[1]
    swallow = _Swallower(hold_s=1.0)
    threshold = gc.get_threshold()
    gc.callbacks.append(swallow)
    gc.set_threshold(50)  # (a collection soon after the run starts, inside its timeout)
    try:
        started = time.monotonic()
        row = record_run(spec, key, timeout=0.3)
        took = time.monotonic() - started
    finally:
        gc.callbacks.remove(swallow)
        gc.set_threshold(*threshold)
    assert swallow.calls > 1
    assert row["status"] == "timeout", row["error"]
    assert row["error"] == "timed out after 0.3 s"
    assert took < 4.0  # (stopped soon after the first delivery was lost: the dropped second and a redelivery)


@pytest.mark.parametrize(
    ("line", "column", "value"),
    [(3, "gpus", "inf"), (3, "gpus", "-3"), (4, "finish_s", "-100.0"), (2, "jct_s", "inf"), (6, "arrival_s", "-1e300")],
)
@pytest.mark.parametrize("kind", ["jct-cdf", "utilisation", "gantt"])
def test_a_jobs_csv_value_that_is_no_time_or_count_is_refused(tmp_path, capsys, line, column, value, kind):
    """A damaged jobs.csv holding a GPU count or a time that is infinite or below 0 was drawn as
    if it were one (an endless bar, a negative GPU count, a JCT CDF to infinity; numpy's
    "invalid value encountered in cast" warning for an infinite GPU count): now it is refused,
    naming the file, its line and the column, as a row cut short is."""
    from roundhouse.tools.cli import main
    from tests.test_plots_and_report import HEADER, hand_run

    run = hand_run(tmp_path / "run")
    lines = (run / "jobs.csv").read_text().splitlines()
    at = HEADER.split(",").index(column)
    fields = lines[line - 1].split(",")
    fields[at] = value
    lines[line - 1] = ",".join(fields)
    (run / "jobs.csv").write_text("\n".join(lines) + "\n")
    out = tmp_path / "p.png"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (no numpy warning in place of a message)
        assert main(["plot", str(run), "--kind", kind, "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{run / 'jobs.csv'}:{line}: column '{column}' holds {float(value):g}, where " in err
    assert not out.exists()


def test_a_whole_jobs_csv_is_still_drawn(tmp_path):
    """(The check above refuses only what no run writes.)"""
    from roundhouse.tools.cli import main
    from tests.test_plots_and_report import hand_run

    run = hand_run(tmp_path / "run")
    for kind in ("jct-cdf", "utilisation", "gantt"):
        assert main(["plot", str(run), "--kind", kind, "-o", str(tmp_path / f"{kind}.png")]) == 0


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_timed_out_run_leaves_nothing_to_fire_at_its_thread_later():
    """A timeout that fired while its watchdog was being set up (a short --timeout on a Dask
    worker) escaped before the watchdog could be stopped: its thread asking whether the sweep
    was interrupted went on for ever, and fired into the worker's thread whenever it was (into
    Dask's own code, or the worker's next run); the timer's exception could also land inside
    the start of that thread, which left the worker's thread waiting for ever. Now nothing is
    delivered outside the run's body, and every run's watchdog ends with it."""
    # (Ten days of rounds: a run short enough to end before its watchdog's thread is given the
    # interpreter, as on a loaded machine, would finish "ok" despite its timeout.)
    spec = RunSpec(str(ROOT / "graphs" / "las.sched"), until=10 * 86400.0)
    with registry.scope():
        key = compile_spec(spec)[1]
    interrupted = threading.Event()
    before = threading.active_count()
    results: list[dict] = []

    def sweep_thread() -> None:  # (as a Dask worker's thread runs its tasks)
        for _ in range(30):
            results.append(record_run(spec, key, timeout=1e-6, stopped=interrupted.is_set))
        interrupted.set()  # (the sweep stops: no run of it is under way any more)
        until = time.monotonic() + 3 * 0.5 + 1.0  # (what a watchdog left behind would fire in)
        while time.monotonic() < until:
            pass
        results.append({"status": "quiet"})

    worker = threading.Thread(target=sweep_thread, daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert not worker.is_alive(), "the run's thread waits for ever"
    assert [row["status"] for row in results] == ["timeout"] * 30 + ["quiet"]
    time.sleep(1.0)
    assert threading.active_count() <= before  # (no watchdog thread left asking)


def test_a_timeout_delivered_as_the_run_ends_leaves_no_watchdog_thread_behind():
    """A timeout delivered just as the run's body returned (the watchdog's thread held its lock,
    delivering, while the run's thread waited for it to end the run) landed in the first call
    of that ending, `Event.set`, so the watchdog was never told the run was over: its threads
    woke every half second for ever, one asking whether the sweep was interrupted."""
    from roundhouse.runtime.run_watchdog import RunTimeout, Watchdog

    before = threading.active_count()
    watchdog = Watchdog(None, stopped=lambda: False)
    holding = threading.Event()

    def deliver_as_the_body_ends() -> None:  # (what the timer does, at the worst moment)
        with watchdog._lock:
            holding.set()
            time.sleep(0.3)  # (the body has returned: its thread waits for the lock)
            watchdog.fired = RunTimeout
            watchdog._deliver(RunTimeout)

    def body() -> None:
        threading.Thread(target=deliver_as_the_body_ends, daemon=True).start()
        holding.wait()

    try:
        fired = watchdog.run(body)
    except RunTimeout:
        fired = RunTimeout
    assert fired is RunTimeout
    time.sleep(1.5)
    assert threading.active_count() <= before


def _edited_run(tmp_path, edit):
    from tests.test_plots_and_report import HEADER, hand_run

    run = hand_run(tmp_path / "run")
    lines = (run / "jobs.csv").read_text().splitlines()
    edit(lines, HEADER.split(","))
    (run / "jobs.csv").write_text("\n".join(lines) + "\n")
    return run


def test_a_jobs_csv_listing_a_job_twice_is_refused_naming_both_lines(tmp_path, capsys):
    from roundhouse.tools.cli import main

    run = _edited_run(tmp_path, lambda lines, header: lines.append(lines[2]))
    assert main(["plot", str(run), "--kind", "gantt", "-o", str(tmp_path / "g.png")]) == 2
    err = capsys.readouterr().err
    last = len((run / "jobs.csv").read_text().splitlines())
    assert f"{run / 'jobs.csv'}:{last}: job " in err and "again (as on line 3): a run lists each job once" in err
    assert not (tmp_path / "g.png").exists()


def test_a_job_that_finished_before_it_started_is_refused(tmp_path, capsys):
    from roundhouse.tools.cli import main

    def finish_first(lines, header):  # (job 1 started at 50 s: it now finishes at 30 s)
        fields = lines[2].split(",")
        fields[header.index("finish_s")] = str(float(fields[header.index("first_start_s")]) - 20.0)
        lines[2] = ",".join(fields)

    run = _edited_run(tmp_path, finish_first)
    assert main(["plot", str(run), "--kind", "jct-cdf", "-o", str(tmp_path / "j.png")]) == 2
    err = capsys.readouterr().err
    assert f"{run / 'jobs.csv'}:3: job 1 finished at 30 s, before it first started (50 s)" in err
