"""The node agent (`roundhouse agent`): Blox's WorkerManager, over ZeroMQ.

One agent runs on every GPU node. It connects a DEALER socket to the scheduler's ROUTER,
registers the node's GPUs (found with NVML or torch, or given with `--fake-gpus 4:V100` on a
machine without GPUs, which still runs real training processes; with `--emulate` as well, each
job is held to the speed the scheduler's profile gives for its model on the faked GPU type, so
that a CPU machine emulates a GPU cluster, heterogeneous ones included), and then:

- launches each job's workers on this node as processes, one per GPU (forked from a process
  that has already imported PyTorch, when the job is a workload module), with
  `CUDA_VISIBLE_DEVICES`, `RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `MASTER_ADDR`/`MASTER_PORT` and
  the ROUNDHOUSE_ variables the client library reads (agents/jobenv.py); a launch onto a GPU
  that a previous job still holds (it is checkpointing) waits until that GPU is free;
- keeps each worker's lease as one byte of a memory-mapped file: revoking sets it, and the
  worker sees it at its next iteration, checkpoints and exits (the scheduler revokes only
  rank 0 of a multi-worker job; the workers agree on the exit iteration among themselves);
  a worker that does not exit within the grace period is terminated;
- collects the workers' reports on a node-local socket and forwards progress and metrics
  (loss, iteration time) to the scheduler;
- reports every exit (done, preempted with its checkpoint, failed with the end of its log,
  killed) and keeps the report until the scheduler acknowledges it, resending it after a
  reconnection, so that a restarted scheduler loses none;
- heartbeats, and re-registers (listing its running workers) when a restarted scheduler does
  not know it.

Workers die with the agent (Linux PR_SET_PDEATHSIG, through the fork server), and so do the
processes they started (each worker leads a process group, which the guardian kills when the
agent dies): a lost agent's jobs are restarted elsewhere from their checkpoints by the
scheduler, and must not run on behind its back.

Its parts, one idea each: `service` (the agent: its loop, the scheduler's messages, stopping),
`scheduler_link` (the connection to the scheduler: registration, heartbeats, numbered
messages), `processes` (launching and supervising the job processes), `forkserver` (the
process the workers are forked from), `guardian` (the process that kills the workers' process
groups if the agent dies), `leases` (revocation,
the two-phase stop), `job_reports` (the reports socket from the jobs), `exits` (exit reports
kept until acknowledged), `emulated` (many emulated nodes in one process, jobs as timers:
`--nodes`), `messages` (reading a socket's messages), `gpus` (finding the
node's GPUs) and `workfolder` (the work folder).
"""

from roundhouse.agents.agent.gpus import Gpu, find_gpus
from roundhouse.agents.agent.processes import PROJECT_ROOT, spawn_worker
from roundhouse.agents.agent.service import Agent

__all__ = ["PROJECT_ROOT", "Agent", "Gpu", "find_gpus", "spawn_worker"]
