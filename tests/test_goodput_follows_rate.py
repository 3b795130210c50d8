"""A running job's goodput follows its rate when only the rate changes: an allocator gives it
other CPU cores and memory on the GPUs it holds, or its space-sharing partner leaves. Its batch
is unchanged, so goodput is the new rate, as a launch or resize books it (docs/semantics.md)."""

from __future__ import annotations

import numpy as np

from roundhouse.runtime.types import Plan
from tests.test_synergy import apply, column, launch, machine, world_of  # noqa: F401 (machine: a fixture)
from tests.test_synergy_shares_fixes import pair_and_rest


def test_a_kept_job_given_other_cpu_and_memory_has_its_goodput_at_its_new_rate(machine):  # noqa: F811
    world = world_of(machine(), [(0, "AlexNet", 4)])
    apply(world, launch(world, {0: [0, 1, 2, 3]}, alloc={0: (24.0, 500.0)}))
    before = column(world, "rate", 0)
    row = world.jobs.row_of(0)
    apply(world, Plan(keep=[row], alloc_rows=[row], alloc_cpus=[4.0], alloc_memory_gb=[60.0]), now=300.0)
    after = column(world, "rate", 0)
    assert after < before  # (AlexNet slows with fewer cores and less memory)
    assert column(world, "goodput", 0) == after


def test_a_partner_left_alone_has_its_goodput_at_its_rate_alone(machine):  # noqa: F811
    world = world_of(machine(), [(0, "A3C", 1), (1, "CycleGAN", 1), (2, "AlexNet", 7)])
    apply(world, pair_and_rest(world, alloc={2: (21.0, 437.5)}))
    shared = column(world, "rate", 1)
    keep = [world.jobs.row_of(1), world.jobs.row_of(2)]
    apply(world, Plan(keep=np.array(keep), suspend=[world.jobs.row_of(0)]), now=300.0)
    assert column(world, "rate", 1) != shared  # (alone on its GPU: another rate)
    assert column(world, "goodput", 1) == column(world, "rate", 1)
