"""The contract between an agent and the job processes it launches: the environment variables
the agent sets (agents/agent/, and the profiler, agents/profiler.py) and the client library
reads (agents/client.py), with their meanings and the defaults a job assumes when one is not set
(run by hand, outside an agent).

| variable                      | field              | meaning                                                   |
|-------------------------------|--------------------|-----------------------------------------------------------|
| ROUNDHOUSE_JOB_ID             | job_id             | the scheduler's job id                                    |
| ROUNDHOUSE_ATTEMPT            | attempt            | which launch of the job this is (1, 2, ...)               |
| RANK, WORLD_SIZE, LOCAL_RANK  | rank, ...          | this worker among the job's workers, and on its node      |
| MASTER_ADDR, MASTER_PORT      | master_addr, ...   | where rank 0 holds the job's rendezvous                   |
| CUDA_VISIBLE_DEVICES          | gpu                | the GPU this worker has (a node-local index)              |
| ROUNDHOUSE_LEASE              | lease              | the worker's lease file (one byte; set when revoked)      |
| ROUNDHOUSE_AGENT              | agent              | the agent's node-local socket for reports                 |
| ROUNDHOUSE_ITERATIONS         | iterations         | the job's total work, in the unit ROUNDHOUSE_COUNTS says  |
| ROUNDHOUSE_COUNTS             | counts             | what iterations count: steps, or samples trained (elastic jobs) |
| ROUNDHOUSE_BATCH_SIZE         | batch_size         | the batch size (0: the workload's own)                    |
| ROUNDHOUSE_MODEL              | model              | the model's name as the trace gives it                    |
| ROUNDHOUSE_SEED               | seed               | the job's random seed                                     |
| ROUNDHOUSE_THREADS            | threads            | CPU threads per worker (0: the library's default)         |
| ROUNDHOUSE_CHECKPOINT_DIR     | checkpoint_dir     | where rank 0 writes checkpoints (storage all nodes read)  |
| ROUNDHOUSE_CHECKPOINT_EVERY   | checkpoint_every_s | also checkpoint this often, in seconds (0: only revoked)  |
| ROUNDHOUSE_RESUME             | resume             | the checkpoint to resume from (unset: from the start)     |
| ROUNDHOUSE_RESUME_ITERATION   | resume_iteration   | the point that checkpoint holds, as the scheduler has it (same unit) |
| ROUNDHOUSE_REPORT_EVERY       | report_every_s     | send progress to the agent at most this often, in seconds |
| ROUNDHOUSE_PACE               | pace_iters_per_s   | an emulated GPU's speed, in that unit a second (0: as fast as it goes) |
| ROUNDHOUSE_LR_SCALE           | lr_scale           | the factor for the job's own learning rate (unset: none)  |
| ROUNDHOUSE_LAUNCHED_AT        | launched_at        | when the agent started the process (Unix time)            |
| ROUNDHOUSE_DIST_TIMEOUT       | dist_timeout_s     | how long the job's collectives wait for a worker, seconds |
| ROUNDHOUSE_JOIN               | join_generation    | started by this resize of a running job (0: a launch)     |

This module imports only the standard library: training processes import it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

# field name -> environment variable
VARIABLES: dict[str, str] = {
    "job_id": "ROUNDHOUSE_JOB_ID",
    "attempt": "ROUNDHOUSE_ATTEMPT",
    "rank": "RANK",
    "world_size": "WORLD_SIZE",
    "local_rank": "LOCAL_RANK",
    "master_addr": "MASTER_ADDR",
    "master_port": "MASTER_PORT",
    "gpu": "CUDA_VISIBLE_DEVICES",
    "lease": "ROUNDHOUSE_LEASE",
    "agent": "ROUNDHOUSE_AGENT",
    "iterations": "ROUNDHOUSE_ITERATIONS",
    "batch_size": "ROUNDHOUSE_BATCH_SIZE",
    "model": "ROUNDHOUSE_MODEL",
    "seed": "ROUNDHOUSE_SEED",
    "threads": "ROUNDHOUSE_THREADS",
    "checkpoint_dir": "ROUNDHOUSE_CHECKPOINT_DIR",
    "checkpoint_every_s": "ROUNDHOUSE_CHECKPOINT_EVERY",
    "resume": "ROUNDHOUSE_RESUME",
    "resume_iteration": "ROUNDHOUSE_RESUME_ITERATION",
    "report_every_s": "ROUNDHOUSE_REPORT_EVERY",
    "pace_iters_per_s": "ROUNDHOUSE_PACE",
    "launched_at": "ROUNDHOUSE_LAUNCHED_AT",
    "dist_timeout_s": "ROUNDHOUSE_DIST_TIMEOUT",
    "join_generation": "ROUNDHOUSE_JOIN",
    "counts": "ROUNDHOUSE_COUNTS",
    "lr_scale": "ROUNDHOUSE_LR_SCALE",
}
COUNTS = ("steps", "samples")  # (as the wire's launch says, wire/protocol.py: not imported here)


@dataclasses.dataclass(frozen=True)
class JobEnv:
    """What a job process is told, as it reads it (defaults for what is not set)."""

    job_id: int = 0
    attempt: int = 1
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    master_addr: str = "127.0.0.1"
    master_port: int = 29500
    gpu: str | None = None
    lease: str | None = None
    agent: str | None = None
    iterations: int = 100
    batch_size: int = 0
    model: str = ""
    seed: int = 0
    threads: int = 0
    checkpoint_dir: str = "checkpoints"
    checkpoint_every_s: float = 0.0
    resume: str | None = None
    resume_iteration: int | None = None
    report_every_s: float = 0.5
    pace_iters_per_s: float = 0.0
    launched_at: float | None = None
    dist_timeout_s: float = 120.0
    join_generation: int = 0
    counts: str = "steps"
    lr_scale: float | None = None

    @classmethod
    def read(cls, env: Mapping[str, str]) -> JobEnv:
        """What the environment says; a variable unset or empty takes the default."""
        given = {}
        for field in dataclasses.fields(cls):
            text = env.get(VARIABLES[field.name])
            if text in (None, ""):
                continue
            kind = _KINDS[field.name]
            try:
                given[field.name] = kind(text)
            except ValueError:
                expected = {int: "a whole number", float: "a number"}.get(kind, kind.__name__)
                if field.name.endswith("_s"):
                    expected += " of seconds"
                raise ValueError(f"{VARIABLES[field.name]}={text!r}: expected {expected}") from None
        counts = given.get("counts", "steps")
        if counts not in COUNTS:
            raise ValueError(f"{VARIABLES['counts']}={counts!r}: expected {' or '.join(COUNTS)}")
        for name, value in given.items():
            if name in _RANGES and not _RANGES[name][0](value):
                raise ValueError(f"{VARIABLES[name]}={env[VARIABLES[name]]!r}: expected {_RANGES[name][1]}")
        rank, world = given.get("rank", 0), given.get("world_size", 1)
        if rank >= world:
            raise ValueError(
                f"{VARIABLES['rank']}={rank} with {VARIABLES['world_size']}={world}: the rank must be below the world size"
            )
        return cls(**given)


def variables(**fields: object) -> dict[str, str]:
    """The environment variables for the given fields (by JobEnv's field names); fields not given,
    or given as None, are not set, so that the job takes its default."""
    out = {}
    for name, value in fields.items():
        if name not in VARIABLES:
            raise TypeError(f"no job environment field {name!r}")
        if value is not None:
            out[VARIABLES[name]] = repr(value) if isinstance(value, float) else str(value)
    return out


def _kind(annotation: str):
    return int if annotation.startswith("int") else float if annotation.startswith("float") else str


_KINDS = {field.name: _kind(str(field.type)) for field in dataclasses.fields(JobEnv)}


def _at_least(low: float):
    return lambda v: math.isfinite(v) and v >= low


# field -> (whether a value is in range, what is expected), for the fields with a range
_RANGES = {
    "attempt": (_at_least(1), "a whole number of 1 or more"),
    "rank": (_at_least(0), "a whole number of 0 or more"),
    "world_size": (_at_least(1), "a whole number of 1 or more"),
    "local_rank": (_at_least(0), "a whole number of 0 or more"),
    "master_port": (lambda v: 0 < v < 65536, "a port (1 to 65535)"),
    "iterations": (_at_least(0), "a whole number of 0 or more"),
    "batch_size": (_at_least(0), "a whole number of 0 or more (0: the workload's own)"),
    "threads": (_at_least(0), "a whole number of 0 or more (0: the library's default)"),
    "checkpoint_every_s": (_at_least(0), "a finite number of seconds >= 0"),
    "resume_iteration": (_at_least(0), "a whole number of 0 or more"),
    "report_every_s": (_at_least(0), "a finite number of seconds >= 0"),
    "pace_iters_per_s": (_at_least(0), "a finite number >= 0"),
    "launched_at": (_at_least(0), "a finite Unix time"),
    "dist_timeout_s": (lambda v: 0 < v <= 10**7, "a number of seconds above 0, at most 10^7"),
    "join_generation": (_at_least(0), "a whole number of 0 or more"),
    "lr_scale": (_at_least(0), "a finite number >= 0"),
}
