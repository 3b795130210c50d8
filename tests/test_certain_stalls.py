"""A run whose waiting jobs each ask more GPUs than they could ever be given (nothing runs, no
more jobs will arrive, the simulated cluster does not change) stops at its first idle round,
naming the largest job and what it is measured against (runtime/certain_stalls.py); a stall
that is not certain still waits STALL_ROUNDS rounds, and a run that does not stall is as before."""

from __future__ import annotations

from roundhouse.runtime.stalls import STALL_ROUNDS
from roundhouse.tools.cli import main
from tests.own_elements import policy_file

# A policy of one's own that asks the placer FACTOR times the GPUs each job's trace asks for, of
# the GPU type of code TYPE_CODE (None: any).
POLICY = policy_file(
    "Scaled",
    "Asks a multiple of each job's GPUs.",
    """
    typed = None if TYPE_CODE is None else np.full(len(active.rows), TYPE_CODE, dtype=np.int64)
    return Ranking(active.rows, active.gpus * FACTOR, gpu_type=typed)
    """,
    before="import numpy as np\n\nTYPE_CODE = TYPE",
)


def _run(tmp_path, capsys, trace: str, cluster: str, factor: int = 2, gpu_type: int | None = None, *extra: str):
    (tmp_path / "mine.py").write_text(POLICY.replace("FACTOR", str(factor)).replace("= TYPE", f"= {gpu_type!r}"))
    (tmp_path / "jobs.csv").write_text("job_id,arrival_s,gpus,duration_s\n" + trace)
    (tmp_path / "g.sched").write_text(
        'require "mine.py";\nround = 5min;\nsrc :: TraceSource(path="jobs.csv");\n'
        "src -> AcceptAll -> JobPool -> order :: Scaled -> place :: FirstFree -> Launch -> JobMetrics;\n"
    )
    code = main(["run", str(tmp_path / "g.sched"), "--cluster", cluster, "--quiet", *extra])
    return code, " ".join(capsys.readouterr().err.split())


def test_jobs_asked_more_gpus_than_the_cluster_has_stall_at_the_first_idle_round(tmp_path, capsys):
    code, err = _run(tmp_path, capsys, "0,0,8,100\n1,5,6,100\n", "1x8:V100")
    assert code != 0
    # (Job 1 arrives in the first round: the second, at 300s, is the first idle one. Before, the
    # run stopped at t=600000s, 2,000 rounds on, saying none had run for that long.)
    assert "run stalled at t=300s: 2 job(s) wait, none runs and no more jobs will arrive, and none can ever be placed" in err, err
    assert (
        "the largest waiting job (0) wants 16 GPUs (what placer 'place' (FirstFree) was last asked for it; "
        "its trace asks for 8) and the cluster has 8 in all." in err
    ), err


def test_a_ranking_that_keeps_a_job_to_one_type_is_measured_against_that_type(tmp_path, capsys):
    # 3 GPUs fit the cluster's 6, and the V100s' 4, but not the 2 K80s the ranking asks for.
    code, err = _run(tmp_path, capsys, "0,0,3,100\n", "1x4:V100,1x2:K80", 1, 1)
    assert code != 0 and "run stalled at t=0s:" in err, err
    assert (
        "the largest waiting job (0) wants 3 GPUs of type K80, as its ranking asks, and the cluster has 2 it can run on." in err
    ), err


def test_a_stall_is_certain_once_the_jobs_that_fit_have_run(tmp_path, capsys):
    # Job 1 is asked 4 GPUs, which fit: it runs past job 0 (asked 16 of 8) and finishes in the
    # first round; at the second only job 0 waits.
    code, err = _run(tmp_path, capsys, "0,0,8,100\n1,0,2,100\n", "1x8:V100")
    assert code != 0 and "none can ever be placed" in err and "run stalled at t=300s: 1 job(s) wait" in err, err


def test_a_run_whose_time_limit_comes_first_ends_there_as_before(tmp_path, capsys):
    code, err = _run(tmp_path, capsys, "0,0,8,100\n1,5,6,100\n", "1x8:V100", 2, None, "--until", "2h")
    assert code == 0 and "stalled" not in err, err


def test_a_stall_that_is_not_certain_still_waits_its_rounds(tmp_path, capsys):
    # Asked once its trace's GPUs, each job fits the cluster: a policy may yet rank it another
    # way, so the run is not certain to stall and counts its idle rounds. (Here it never stalls:
    # the jobs run.) Asked no GPU type it lacks, a run of jobs that fit is unchanged.
    code, err = _run(tmp_path, capsys, "0,0,8,100\n1,5,6,100\n", "1x8:V100", 1)
    assert code == 0 and "stalled" not in err, err
    code, err = _run(tmp_path, capsys, "0,0,3,100\n", "1x4:V100,1x4:K80", 1, 1)
    assert code == 0 and "stalled" not in err, err


def test_a_stall_that_is_not_certain_still_counts_its_rounds(tmp_path, capsys):
    # A job left out of the ranking fits the cluster: its policy may yet rank it.
    from tests.test_stall_names_the_ranking import small_only_graph

    small_only_graph(tmp_path, "0,0,4,600\n")
    assert main(["run", str(tmp_path / "g.sched"), "--quiet"]) != 0
    err = " ".join(capsys.readouterr().err.split())
    assert f"run stalled at t={(STALL_ROUNDS - 1) * 300}s: 1 job(s) wait, none has run for {STALL_ROUNDS} rounds" in err, err
