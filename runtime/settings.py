"""Graph settings: `name = value;` lines of a `.sched` file (and `--set name=value`)."""

from __future__ import annotations

import os
import re

import attrs

from roundhouse.runtime.values import Duration, FilePath, at_least, at_most, existing_file, non_negative, short_text
from roundhouse.wire.protocol import NAME_RE

MIN_ROUND = Duration(0.001)
MAX_ROUND = Duration(7 * 86400.0)


# Elastic profiles built in (traces/ones.py, traces/pollux.py), named instead of a folder.
BUILT_IN_ELASTIC = ("ones", "pollux")


def existing_folder_or_built_in(instance, attribute, value) -> None:
    """For `elastic_profile`: a folder of applications, or the name of one built in."""
    if value is not None and not os.path.isdir(value) and os.path.basename(value).lower() not in BUILT_IN_ELASTIC:
        raise ValueError(f'names no folder: {value} (nor a profile built in: "ones" or "pollux")')


# A GPU type's name as an agent registers its GPUs under it and a cluster spec file may write it
# (the wire's names: a shorthand's own are a part of them).
GPU_TYPE_NAME = re.compile(NAME_RE)


def gpu_type_names(instance, attribute, value) -> None:
    """For `gpu_types`: GPU type names separated by commas ("" names none)."""
    if not value.strip():
        return
    for item in value.split(","):
        name = item.strip()
        if not name:
            raise ValueError(
                f'has an empty item in "{short_text(value)}" (write GPU type names separated by commas, such as "A100,T4")'
            )
        if not GPU_TYPE_NAME.fullmatch(name):
            raise ValueError(
                f"item '{short_text(name)}' is not a GPU type name (up to 64 letters, digits, '.', '_' and '-', "
                "starting with a letter or digit, as an agent registers a type; names are separated by commas, "
                'such as "A100,T4")'
            )


def named_gpu_types(value: str) -> tuple[str, ...]:
    """The names of a `gpu_types` setting, in order."""
    return tuple(item.strip() for item in value.split(",")) if value.strip() else ()


@attrs.frozen(kw_only=True)
class GraphSettings:
    """Settings of a whole graph. Each has a default; the `.sched` file may override any."""

    # A round shorter than a millisecond would take forever to simulate any real trace; one
    # longer than a week is no scheduler's (and past it, clocks of rounds lose their seconds).
    round: Duration = attrs.field(default=Duration(300.0), validator=[at_least(MIN_ROUND), at_most(MAX_ROUND)])
    checkpoint: Duration = attrs.field(default=Duration(0.0), validator=non_negative)
    checkpoint_per_gpu: Duration = attrs.field(default=Duration(0.0), validator=non_negative)
    restore: Duration = attrs.field(default=Duration(0.0), validator=non_negative)
    # What resizing a running elastic job costs (ONES §4.3, Fig. 16: about 1 s in place, over 20 s by
    # checkpoint and restart).
    resize_in_place: Duration = attrs.field(default=Duration(1.0), validator=non_negative)
    resize_restart: Duration = attrs.field(default=Duration(20.0), validator=non_negative)
    # Epochs of extra training a resize costs per doubling of the batch size beyond 2x in one
    # step (ONES Figs. 13-14: large jumps hurt convergence); 0: linear scaling holds exactly.
    batch_jump_penalty: float = attrs.field(default=0.0, validator=non_negative)
    cluster: str | None = None
    profile: FilePath | None = attrs.field(default=None, validator=existing_file)
    pair_profile: FilePath | None = attrs.field(default=None, validator=existing_file)
    elastic_profile: FilePath | None = attrs.field(default=None, validator=existing_folder_or_built_in)
    seed: int = attrs.field(default=0, validator=non_negative)
    reference_gpu: str = "V100"
    # Types a cluster may hold beyond the profile's: jobs known only by duration run there for their
    # durations. They are named here and in the cluster both, so that a misspelt one is caught; one
    # misspelt in both is warned of when near a profile type (runtime/near_gpu_types.py).
    gpu_types: str = attrs.field(default="", validator=gpu_type_names)
    # Skip the ticks of rounds in which no element's output can change (same results; off to
    # compare, or to watch every round).
    skip_rounds: bool = True

    def __attrs_post_init__(self) -> None:
        if self.checkpoint + self.restore >= self.round:
            raise ValueError(
                f"checkpoint + restore ({self.checkpoint + self.restore:g}s) must be shorter than a round ({self.round:g}s)"
            )


SETTING_DOCS = {
    "round": "length of a scheduling round (the simulator's step, the live backend's period)",
    "checkpoint": "simulated time a suspended job needs to checkpoint before its GPUs are free",
    "checkpoint_per_gpu": "more checkpoint time per GPU the suspended job held (Dally's simulator: 1s)",
    "restore": "simulated time a launched job spends restoring before it makes progress",
    "resize_in_place": "simulated time a job resized in place pauses before it progresses again (ONES: about 1 s)",
    "resize_restart": "simulated time a job resized by checkpoint and restart pauses before it progresses again",
    "batch_jump_penalty": "epochs of extra training per doubling beyond 2x of a job's batch size in one resize (0: none)",
    "cluster": 'the cluster: a spec file or a shorthand such as "32x4:V100" (--cluster overrides)',
    "profile": "the throughput profile table (default: the shipped Gavel table)",
    "pair_profile": "throughputs of two jobs sharing GPUs, for space sharing (default: the shipped Gavel pair table)",
    "elastic_profile": 'a folder of elastic applications (Pollux\'s per-application measurements) whose jobs resize, or "ones" / "pollux" for ONES\' ten or Pollux\'s six built in',
    "seed": "seed from which elements without their own seed derive theirs",
    "reference_gpu": "GPU type on which trace durations were measured",
    "gpu_types": "GPU types a cluster may hold beyond the throughput profile's, separated by commas, such as \"A100,T4\" (jobs known by duration run there; jobs known by model never do); a profile type named here, case aside, stays the profile's; a near miss of one is warned of (V1OO or V10 for V100, not K40 for K80: docs/clusters.md)",
    "skip_rounds": "skip ticking rounds in which nothing can change until the next event (results are identical); false ticks every round while jobs are in the system (an empty cluster still jumps to the next arrival)",
}

attrs.resolve_types(GraphSettings)
