"""`roundhouse agent --scheduler ADDR`: the node agent that runs jobs on this machine's GPUs."""

from __future__ import annotations

import re
import socket
from pathlib import Path

from roundhouse.errors import UsageError
from roundhouse.tools.common import seconds, whole
from roundhouse.tools.live_options import MAX_THREADS, add_security, setup_logging

REVOKE_GRACE = "60s"  # (the default)


def register(sub) -> None:
    p = sub.add_parser("agent", help="run the node agent: register this node's GPUs and run the jobs it is given")
    p.add_argument("--scheduler", required=True, metavar="ADDR", help="the scheduler's address, e.g. tcp://sched:5555")
    p.add_argument("--name", help="this node's name (default: the host name); also the key name with --keys")
    p.add_argument("--fake-gpus", metavar="COUNT:TYPE", help="pretend to have GPUs (e.g. 4:V100): jobs run on the CPU")
    p.add_argument(
        "--emulate",
        action="store_true",
        help="with --fake-gpus: hold every job to the speed the scheduler's profile gives for its model "
        "on the faked GPU type (no faster; a slower CPU stays slower)",
    )
    p.add_argument(
        "--nodes",
        type=whole,
        help="with --fake-gpus and --emulate: emulate this many nodes in this one process, named NAME-0, NAME-1, ... "
        "(jobs run as timers at the profile's speed, not as processes; see docs/live.md, At scale); "
        "without it, one agent named NAME runs real processes",
    )
    p.add_argument(
        "--address",
        help="the address other nodes reach this one at, for multi-node jobs "
        "(default: 127.0.0.1 for a loopback scheduler, else the host name)",
    )
    p.add_argument(
        "--workdir",
        help="folder for job logs, leases and the jobs' working folders (default: a new temporary folder); "
        "what the agent makes there is removed when it exits, unless --keep-workdir",
    )
    p.add_argument("--keep-workdir", action="store_true", help="keep the work folder (job logs included) when the agent exits")
    p.add_argument(
        "--revoke-grace",
        default=REVOKE_GRACE,
        help=f"time a revoked job has to checkpoint before it is terminated (default {REVOKE_GRACE})",
    )
    p.add_argument(
        "--threads-per-gpu",
        type=whole,
        default=0,
        help=f"CPU threads per job process, at most {MAX_THREADS} (default: with --fake-gpus, the cores it may use "
        "divided among the GPUs)",
    )
    add_security(p, "the agent reads scheduler.key and NAME.key_secret")
    p.add_argument("--log-level", default="info", help="debug, info, warning or error (default info)")
    p.set_defaults(handler=agent_command)


def agent_command(args) -> int:
    import os

    from roundhouse.agents.agent import Agent, find_gpus
    from roundhouse.wire.security import ClientSecurity, check_connect_address

    setup_logging(args.log_level)
    # (the address's form first: `--insecure` would take `127.0.0.1:5555`, no tcp://, for an address off this machine)
    check_connect_address(args.scheduler, in_process=False)
    # (an empty --name, an unset shell variable say, is refused as a name, not taken as the host's)
    name = socket.gethostname().split(".")[0] if args.name is None else args.name
    if args.nodes is not None:  # (even --nodes 1: one emulated node, NAME-0)
        if args.nodes < 1:
            raise UsageError(f"--nodes {args.nodes}: give 1 or more")
        return _emulated_nodes(args, name)
    security = ClientSecurity.choose(args.keys, name, args.insecure, args.scheduler)
    if args.emulate and not args.fake_gpus:
        raise UsageError("--emulate needs --fake-gpus: only pretend GPUs are held to the profile's speed")
    gpus = find_gpus(_checked_fake_gpus(args.fake_gpus))
    revoke_grace = _check_process_options(args)
    threads = args.threads_per_gpu
    if threads == 0 and args.fake_gpus:
        # (the cores this process may run on: a container or `taskset` may give fewer than the machine has)
        threads = max(1, len(os.sched_getaffinity(0)) // len(gpus))
    address = _address(args)
    agent = Agent(
        args.scheduler,
        name,
        gpus,
        security,
        address=address,
        workdir=args.workdir,
        revoke_grace_s=revoke_grace,
        threads_per_gpu=threads,
        emulate=args.emulate,
        keep_workdir=args.keep_workdir,
    )
    return agent.run()


# The options about job processes, with their defaults: emulated nodes run none (a job is a
# timer, ended at once when revoked), so there they would mean nothing.
_PROCESS_OPTIONS = (
    ("revoke_grace", "--revoke-grace", REVOKE_GRACE),
    ("workdir", "--workdir", None),
    ("keep_workdir", "--keep-workdir", False),
    ("threads_per_gpu", "--threads-per-gpu", 0),
)


def _check_process_options(args) -> float:
    """The options about job processes checked, as values; the revocation grace in seconds."""
    if not 0 <= args.threads_per_gpu <= MAX_THREADS:
        raise UsageError(f"--threads-per-gpu must be 0 to {MAX_THREADS} (0: the cores divided among the GPUs)")
    # (--workdir is checked, made and locked as the agent starts: agents/agent/workfolder.py)
    if args.workdir is not None and not args.workdir.strip():
        raise UsageError("--workdir: the folder name is empty")
    return seconds(args.revoke_grace, "--revoke-grace")


def _emulated_nodes(args, name: str) -> int:
    """`--nodes N`: N emulated nodes NAME-0 ... NAME-{N-1} in this process, each checked before
    any connection: its name (what the wire carries), its key pair with --keys (the scheduler
    admits a node only under a key named after it), and the files and sockets they all need."""
    from roundhouse.agents.agent import find_gpus
    from roundhouse.agents.agent.emulated import EmulatedNodes, check_node_budget
    from roundhouse.wire.security import ClientSecurity, check_name

    if not (args.emulate and args.fake_gpus):
        raise UsageError("--nodes needs --fake-gpus and --emulate: only emulated nodes share a process")
    _check_process_options(args)
    given = [flag for dest, flag, default in _PROCESS_OPTIONS if getattr(args, dest) != default]
    if given:
        raise UsageError(
            f"--nodes {args.nodes} with {', '.join(given)}: emulated nodes run no job processes "
            "(a job is a timer, ended at once when revoked, and writes no files), so leave "
            + ("it" if len(given) == 1 else "them")
            + " out"
        )
    check_name(name, "--name")
    last = f"{name}-{args.nodes - 1}"
    try:
        check_name(last, "node name")
    except UsageError:
        raise UsageError(
            f"--nodes {args.nodes} with --name {name}: the node names {name}-0 to {last} must be at most 64 characters "
            "(letters, digits, '.', '_' and '-'); give a shorter --name"
        ) from None
    gpus = find_gpus(_checked_fake_gpus(args.fake_gpus))
    check_node_budget(args.nodes)
    if args.keys and not args.insecure and Path(args.keys).is_dir():
        missing = [f"{name}-{i}" for i in range(args.nodes) if not (Path(args.keys) / f"{name}-{i}.key_secret").is_file()]
        if missing:
            shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
            raise UsageError(
                f"--nodes {args.nodes} with --keys {args.keys}: each emulated node connects with its own key pair "
                f"(the scheduler admits a node only under a key named after it), and {args.keys} has none for {shown}; "
                f"make them with `roundhouse keys {args.keys} {name}-{{0..{args.nodes - 1}}}` (bash)"
            )
    for i in range(args.nodes):  # (each node's key pair readable, its keys well formed)
        security = ClientSecurity.choose(args.keys, f"{name}-{i}", args.insecure, args.scheduler)
    address = _address(args)
    return EmulatedNodes(args.scheduler, name, args.nodes, gpus, security, address=address).run()


def _checked_fake_gpus(fake: str | None) -> str | None:
    """--fake-gpus as given, its count checked to be 1 or more: a node of no GPUs is a count to
    change, not a COUNT:TYPE written wrong (the rest of its form is checked by `find_gpus`)."""
    if fake is not None and not fake.strip():  # (an unset shell variable: not "no GPUs found, use --fake-gpus")
        raise UsageError("--fake-gpus: empty; write COUNT:TYPE, e.g. 4:V100")
    count = (fake or "").partition(":")[0].strip()
    if re.fullmatch(r"[+-]?[0-9]+", count) and int(count) < 1:
        raise UsageError(f"--fake-gpus {fake}: the GPU count must be 1 or more (it is {int(count)}), e.g. 4:V100")
    return fake


def _address(args) -> str:
    """The address other nodes reach this one at, as registering carries it: --address, checked
    against what the protocol takes, or a default from the scheduler's address."""
    from roundhouse.wire.protocol import SCHEMAS, ProtocolError
    from roundhouse.wire.security import is_loopback

    if args.address is None:
        return "127.0.0.1" if is_loopback(args.scheduler) else socket.getfqdn()
    try:  # (as a registration is checked: no space or control character, which no host name holds)
        SCHEMAS["register"].fields["address"].check(args.address, "--address")
    except ProtocolError as err:
        raise UsageError(f"{err.reason}; give the host name or IP address other nodes reach this one at") from None
    return args.address
