"""The example training workloads an agent can run, by model name: a launch message names the
module (`workload`), so that the scheduler and the agents agree on it. The workloads themselves
are agents/workloads/; this table does not import them (or torch)."""

from __future__ import annotations

WORKLOADS: dict[str, str] = {
    "ResNet-18": "roundhouse.agents.workloads.cnn",
    "ResNet-50": "roundhouse.agents.workloads.cnn",
    "LM": "roundhouse.agents.workloads.lstm",
    "Recommendation": "roundhouse.agents.workloads.recommend",
}


def workload_module(model: object) -> str | None:
    """The module that trains `model` (a canonical model name, as the profile spells it), or None."""
    return WORKLOADS.get(model) if isinstance(model, str) else None
