"""Example training workloads: small models from the Blox and Gavel job mix, on synthetic data.

Each is a real PyTorch training script that uses the client library (agents/client.py): it
checks its lease every iteration, checkpoints when revoked and resumes from the checkpoint, and
reports its loss and iteration time. They run on CPU as well as on GPUs, alone or data-parallel
over several processes (gloo on CPU, NCCL on GPU). Run one by hand with, for example::

    ROUNDHOUSE_ITERATIONS=50 python -m agents.workloads.cnn

| model (Gavel's name)   | module                      | what it is                               |
|------------------------|-----------------------------|------------------------------------------|
| ResNet-18, ResNet-50   | agents.workloads.cnn        | a small residual CNN on 3x16x16 images   |
| LM                     | agents.workloads.lstm       | an LSTM language model on token streams  |
| Recommendation         | agents.workloads.recommend  | an autoencoder recommender (Recoder-like)|

The models are shrunk to run quickly on one CPU core; the point is real training processes
with real checkpoints and collectives, not the published models' accuracy. This module does
not import torch; the table of which module trains which model is wire/workloads.py.
"""

from __future__ import annotations

from roundhouse.wire.workloads import workload_module


def workload_for(model: object) -> str | None:
    """The module that trains `model` (Gavel's name, or any accepted alias), or None."""
    if not isinstance(model, str):
        return None
    from roundhouse.traces.profiles import canonical_model

    return workload_module(canonical_model(model) or model)
