"""benchmarks/policies.py --quick loads its cluster as the full case does: fewer jobs, on a
cluster as much smaller, arriving as much less often, so that a queue builds and the policies
differ (tests/test_small_fixes_benchmark_options.py runs it). (Before, 200 jobs on the full cluster arrived before it filled, and every policy but
Optimus ran each job at once, with the same average JCT.)"""

from __future__ import annotations

import sys

from tests.conftest import REPO

BENCH = REPO / "benchmarks"


def test_the_quick_case_offers_each_gpu_the_full_cases_load():
    sys.path.insert(0, str(BENCH))
    import policies

    scale = policies.JOBS / policies.QUICK_JOBS
    assert policies.QUICK_JOBS < policies.JOBS
    assert policies.NODES / policies.QUICK_NODES == scale  # jobs per GPU, and arrivals per GPU-hour, as the full case
