"""Built-in elements doing what their documentation blocks say: each test states the documented
behaviour that a run did not show."""

import numpy as np

from roundhouse import Simulation

# Two 1-GPU jobs of one duration whose models' throughputs put their remaining times a rounding
# error apart, the later-admitted one below: Transformer at batch 16 and ResNet-18 at batch 64 on
# the shipped profile (3000.0000000000005 s and 2999.9999999999995 s for a 3000 s job).
TIED_TRACE = "job_id,arrival_s,gpus,duration_s,model,batch_size\n0,0,1,3000,Transformer,16\n1,0,1,3000,ResNet-18,64\n"

GRAPH = """round = 5min;
cluster = "1x1:V100";
arrivals :: TraceSource(path="{trace}");
arrivals -> AcceptAll -> pool :: JobPool -> {policy} -> FirstFree -> Launch -> JobMetrics;
"""


def _first_starts(tmp_path, policy: str) -> dict[int, float]:
    trace = tmp_path / "tied.csv"
    trace.write_text(TIED_TRACE)
    sim = Simulation(GRAPH.format(trace=trace, policy=policy))
    sim.step()
    table = sim.world.jobs
    remaining = table.column("work") / table.column("reference_rate")
    # (the case the documentation speaks of: equal durations, remaining times a few ulps apart)
    assert remaining[1] < remaining[0] and np.isclose(remaining[0], remaining[1], rtol=1e-12, atol=0)
    sim.run()
    jobs = sim.jobs(["job_id", "first_start_s"])
    return dict(zip(jobs["job_id"].to_list(), jobs["first_start_s"].to_list()))


def test_srsf_ties_go_to_the_job_admitted_first(tmp_path):
    # Srsf: "Ties go to the job admitted first." Two jobs of one duration and GPU count have one
    # remaining service; the first admitted runs first, as under Srtf.
    starts = _first_starts(tmp_path, "Srsf")
    assert starts[0] == 0.0 and starts[1] > 0.0
    assert _first_starts(tmp_path, "Srtf") == starts


def test_first_free_says_a_consolidating_ranking_is_consolidated(tmp_path):
    # FirstFree's reference said only "the lowest-numbered free GPUs, wherever they are"; under a
    # ranking whose entries ask for one node (YarnCS) a job that no node holds waits instead.
    from roundhouse.elements.placement.builtin import FirstFree

    trace = tmp_path / "t.csv"
    trace.write_text("job_id,arrival_s,gpus,duration_s\n0,0,3,30000\n1,0,3,30000\n2,100,2,30000\n")
    graph = f"""round = 5min;
cluster = "2x4:V100";
arrivals :: TraceSource(path="{trace}");
arrivals -> AcceptAll -> JobPool -> {{policy}} -> FirstFree -> Launch -> JobMetrics;
"""
    started = {}
    for policy in ("Fifo", "YarnCS"):
        sim = Simulation(graph.format(policy=policy))
        sim.run_until(600)
        started[policy] = sim.jobs(["job_id", "first_start_s"])["first_start_s"].is_not_nan().to_list()
    assert started["Fifo"] == [True, True, True]  # spread over the 1 + 1 GPUs left
    assert started["YarnCS"] == [True, True, False]  # no node holds 2: it waits
    assert "consolidated placement" in FirstFree.doc.description and "waits" in FirstFree.doc.description


def test_selective_placers_count_only_multi_gpu_jobs_as_consolidated(tmp_path):
    # SkewAwarePlacer's `consolidated`: "waiting multi-GPU jobs this round that must be
    # consolidated". Under YarnCS every entry asks for one node, one-GPU jobs included: a waiting
    # one-GPU job is no multi-GPU job.
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,arrival_s,gpus,duration_s\n0,0,1,3000\n1,0,1,3000\n2,0,1,3000\n3,0,2,3000\n")
    counts = {}
    for policy in ("YarnCS", "Fifo(backfill=true)"):
        sim = Simulation(f"""round = 5min;
cluster = "1x2:V100";
arrivals :: TraceSource(path="{trace}");
arrivals -> AcceptAll -> JobPool -> {policy} -> place :: SkewAwarePlacer -> Launch -> JobMetrics;
""")
        sim.step()
        waiting = sim.jobs(["job_id", "first_start_s"])["first_start_s"].is_nan().to_list()
        assert waiting == [False, False, True, True]  # jobs 2 (1 GPU) and 3 (2 GPUs) wait
        counts[policy] = sim.graph.elements["place"].counters["consolidated"]
    # Job 3 (no tensor skew known: consolidated) is the one waiting multi-GPU job, either way.
    assert counts == {"YarnCS": 1, "Fifo(backfill=true)": 1}


def test_selective_placers_consolidated_counter_is_this_rounds(tmp_path):
    # `consolidated` counts the waiting multi-GPU jobs "this round": once the one such job runs
    # (and after it has finished), no job waits, though the rounds placing nothing asked nothing.
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,arrival_s,gpus,duration_s\n0,0,2,3000\n")
    sim = Simulation(f"""round = 5min;
cluster = "1x4:V100";
arrivals :: TraceSource(path="{trace}");
arrivals -> AcceptAll -> JobPool -> Fifo -> place :: SkewAwarePlacer -> Launch -> JobMetrics;
""")
    sim.step()
    assert sim.graph.elements["place"].counters["consolidated"] == 1  # waiting at the first round
    sim.step()
    assert sim.jobs(["first_start_s"])["first_start_s"].to_list() == [0.0]
    assert sim.graph.elements["place"].counters["consolidated"] == 0
    assert sim.run().counters["place"]["consolidated"] == 0
