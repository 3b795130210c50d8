"""The example training workloads an agent can run, by model name: a launch message names the
module (`workload`), so that the scheduler and the agents agree on it. The workloads themselves
are agents/workloads/; this table does not import them (or torch), so that the profiler can
check a batch size against a workload's dataset before it starts one."""

from __future__ import annotations

from typing import NamedTuple


class Workload(NamedTuple):
    module: str  # the module that trains the model
    samples: int  # its fixed dataset's samples: a step takes a batch from it for every worker
    default_batch: int  # each worker's batch when the launch gives none


WORKLOADS: dict[str, Workload] = {
    "ResNet-18": Workload("roundhouse.agents.workloads.cnn", 2048, 16),
    "ResNet-50": Workload("roundhouse.agents.workloads.cnn", 2048, 16),
    "LM": Workload("roundhouse.agents.workloads.lstm", 2048, 10),
    "Recommendation": Workload("roundhouse.agents.workloads.recommend", 4096, 64),
}


def workload_module(model: object) -> str | None:
    """The module that trains `model` (a canonical model name, as the profile spells it), or None."""
    workload = WORKLOADS.get(model) if isinstance(model, str) else None
    return workload.module if workload else None
