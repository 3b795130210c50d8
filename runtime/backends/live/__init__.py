"""The live backend: the same interface as the simulator, carried out by node agents over ZeroMQ.

The scheduler binds a ROUTER socket. Each node runs `roundhouse agent`, which registers its
GPUs; the backend maps each agent (by node name) onto a node of the graph's cluster, so GPU ids
mean the same thing live and simulated. Everything the run is told is journaled before it is
acted on, so a restarted scheduler resumes the run. The package's rooms, one idea each:

| module          | what it holds                                                                  |
|-----------------|--------------------------------------------------------------------------------|
| backend.py      | `LiveBackend`: poll, apply, advance (the backend interface), submitters' requests |
| server.py       | the socket: receive, validate and dispatch messages; send; replies after commit |
| nodes.py        | the node registry: registrations, heartbeats, lost nodes, online GPUs          |
| attempts.py     | attempts and leases: launch, revoke, resume points, how an attempt ends        |
| reports.py      | what agents report about attempts (progress, exits, running processes)         |
| takeover.py     | the journal's rounds, replay, and taking running jobs back after a restart     |
| submissions.py  | jobs submitted with `roundhouse submit`                                        |
| records.py      | a round as the journal records it, and back                                    |
| round.py        | what the rooms share: the clock and the news since the last poll               |

Messages are the wire protocol's (wire/protocol.py); the live backend never imports the agents.
"""

from roundhouse.runtime.backends.live.backend import LiveBackend, LiveOptions

__all__ = ["LiveBackend", "LiveOptions"]
