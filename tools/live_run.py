"""Running a graph live (`roundhouse serve`, `roundhouse run --live`): the options and the run."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from roundhouse.errors import UsageError
from roundhouse.runtime.results_files import write_results
from roundhouse.tools.common import seconds, whole
from roundhouse.tools.live_options import add_security, check_named, duration_within, setup_logging
from roundhouse.tools.results import compile_with_overrides, print_summary

MAX_HEARTBEAT_TIMEOUT_S = 3600.0
# The longest wait for agents before round 0: a day, as `submit --timeout` (a longer wait is a
# mistake, and `inf` one too: the run would never start without every node).
MAX_WAIT_FOR_AGENTS_S = 86400.0


def add_live_options(p, given_only: bool = False) -> None:
    """The live-run options. With `given_only` (`run`, where they need --live) an option left out
    sets nothing, so that `refuse_live_only` sees every one given, a default value included;
    `run_live` fills in the defaults of those left out."""
    if given_only:
        p = _GivenOnly(p)
    add_security(p, "the scheduler reads scheduler.key_secret and authorized/")
    p.add_argument(
        "--journal",
        metavar="FILE",
        help="SQLite journal of the run; serve started again with the same journal resumes that run "
        "(default: roundhouse-journal.sqlite inside the --checkpoints folder, so ./checkpoints/roundhouse-journal.sqlite)",
    )
    p.add_argument(
        "--checkpoints",
        default="checkpoints",
        metavar="DIR",
        help="where jobs write checkpoints: storage every node can read (default: ./checkpoints)",
    )
    p.add_argument("--heartbeat", default="2s", help="agents heartbeat this often (default 2s)")
    p.add_argument("--heartbeat-timeout", default="10s", help="an agent silent this long is lost (default 10s)")
    p.add_argument("--retries", type=whole, default=3, help="relaunch a crashed job this many times (default 3)")
    p.add_argument(
        "--checkpoint-every", default="60s", help="jobs also checkpoint this often; 0 for only when revoked (default 60s)"
    )
    p.add_argument(
        "--wait-for-agents", default="30s", help="before round 0, wait this long for every node (default 30s, at most 1d)"
    )
    p.add_argument(
        "--ports", default="29500..30000", help="rendezvous ports for multi-worker jobs (half-open range; default 29500..30000)"
    )
    p.add_argument("--stop-agents", action="store_true", help="tell the agents to shut down when the run ends")
    p.add_argument("--log-level", default="info", help="debug, info, warning or error (default info)")


class _GivenOnly:
    """A parser (or argument group) whose arguments set their attribute only when given."""

    def __init__(self, parser) -> None:
        self._parser = parser

    def add_argument(self, *flags, **kwargs):
        return self._parser.add_argument(*flags, **{**kwargs, "default": argparse.SUPPRESS})


def _live_defaults() -> dict:
    """Each live option's name and default value."""
    options = argparse.ArgumentParser(add_help=False)
    add_live_options(options)
    return vars(options.parse_args([]))


def refuse_live_only(args) -> None:
    """A UsageError naming the live-run options given (`run` without --live, its live options
    added with `given_only`): a run that is not live would ignore them, default and invalid
    values included."""
    # (each live option's flag is its name so spelled)
    given = ["--" + name.replace("_", "-") for name in _live_defaults() if hasattr(args, name)]
    if given:
        which = f"{given[0]} is" if len(given) == 1 else f"{', '.join(given)} are"
        raise UsageError(f"{which} only for a live run: give --live ADDR, or leave {'it' if len(given) == 1 else 'them'} out")


def _fill_live_defaults(args) -> None:
    """Give the live options left out (`run --live`, see `add_live_options`) their defaults."""
    for name, default in _live_defaults().items():
        if not hasattr(args, name):
            setattr(args, name, default)


def live_options(args):
    from roundhouse.runtime.backends.live import LiveOptions

    try:
        lo, hi = (int(x) for x in args.ports.split(".."))
    except ValueError:
        raise UsageError(f"--ports {args.ports!r}: write LOW..HIGH, e.g. 29500..30000") from None
    if not 0 < lo < hi <= 65536:
        raise UsageError(f"--ports {args.ports!r}: need 0 < LOW < HIGH <= 65536")
    if args.retries < 0:
        raise UsageError(f"--retries {args.retries}: must be 0 or more")
    heartbeat = seconds(args.heartbeat, "--heartbeat", positive=True)
    timeout = seconds(args.heartbeat_timeout, "--heartbeat-timeout", positive=True)
    if not heartbeat < timeout:
        raise UsageError(f"--heartbeat {args.heartbeat}: must be shorter than --heartbeat-timeout ({args.heartbeat_timeout})")
    # Agents learn the heartbeat period from the welcome, and jobs the checkpoint period from
    # their launch: a value those messages cannot carry would fail every registration or launch.
    duration_within(heartbeat, args.heartbeat, "--heartbeat", "welcome", "heartbeat_s")
    # The scheduler waits this long for a silent agent (a run's end with --stop-agents too):
    # bounded as the heartbeat is.
    if timeout > MAX_HEARTBEAT_TIMEOUT_S:
        raise UsageError(f"--heartbeat-timeout {args.heartbeat_timeout}: must be at most 1h")
    checkpoint_every = seconds(args.checkpoint_every, "--checkpoint-every")
    duration_within(checkpoint_every, args.checkpoint_every, "--checkpoint-every", "launch", "checkpoint_every_s")
    return LiveOptions(
        heartbeat_s=heartbeat,
        heartbeat_timeout_s=timeout,
        max_retries=args.retries,
        checkpoint_every_s=checkpoint_every,
        checkpoint_dir=args.checkpoints,
        ports=(lo, hi),
        wait_for_agents_s=_wait_for_agents(args.wait_for_agents),
        stop_agents=args.stop_agents,
    )


def _wait_for_agents(text: str) -> float:
    """--wait-for-agents in seconds: 0 (start at once) to MAX_WAIT_FOR_AGENTS_S."""
    bound = f"--wait-for-agents {text}: must be at most 1d (0s starts at once with the agents registered by then)"
    if text.strip().lower().lstrip("+") in ("inf", "infinity"):
        raise UsageError(bound)
    value = seconds(text, "--wait-for-agents")
    if value is None or not value <= MAX_WAIT_FOR_AGENTS_S:  # (also refuses nan)
        raise UsageError(bound)
    return value


def check_bind(bind: str, flag: str = "--bind") -> None:
    """Refuse a --bind (or --live) address no agent could reach: agents and submitters are other
    processes, and an inproc:// address is seen only inside the scheduler's own. An address
    ZeroMQ cannot listen on at all (`127.0.0.1:5555`, no transport) is said as such here, before
    the security checks, which would otherwise take it for a non-loopback address."""
    if bind.strip().lower().startswith("inproc://"):
        raise UsageError(
            f"{flag} {bind}: an inproc:// address is reachable only inside this process, not by agents or "
            "submitters; use tcp://HOST:PORT (or ipc://PATH on this machine)"
        )
    transport, sep, rest = bind.partition("://")
    if sep and transport == "ipc" and rest:
        _check_ipc_path(bind, rest, flag)
        return
    if sep and transport == "tcp" and re.fullmatch(_TCP_BIND, rest):
        return
    if sep and transport == "tcp":
        problem = "not HOST:PORT (an IP address, a host or interface name, or *, then a port number, or * for a free one)"
    else:
        problem = "not an address to listen on (tcp://HOST:PORT, e.g. tcp://127.0.0.1:5555, or ipc://PATH)"
    raise UsageError(f"cannot listen on {bind} ({flag}): {problem}")


def _check_ipc_path(bind: str, path: str, flag: str) -> None:
    """Refuse an ipc:// path a Unix socket cannot be made at: one longer than a socket's address
    holds, or one in a folder that does not exist (ZeroMQ's own messages for these are advice to
    programmers, and repeat the address). `@NAME` (an abstract socket) and `*` (a name ZeroMQ
    picks) make no file."""
    from roundhouse.wire.security import IPC_PATH_BYTES

    size = len(path.encode())
    if size >= IPC_PATH_BYTES:
        raise UsageError(
            f"cannot listen on {bind} ({flag}): the path is {size} bytes, and a Unix socket's address holds at most "
            f"{IPC_PATH_BYTES - 1} bytes; use a shorter path"
        )
    folder = Path(path).parent
    if not path.startswith("@") and path != "*" and not folder.is_dir():
        raise UsageError(f"cannot listen on {bind} ({flag}): no folder {folder}")


# What follows tcp:// in an address ZeroMQ listens on: a host (an IP address, in brackets for
# IPv6; a host or interface name; * for every interface), then a port number or * for a free one.
_TCP_BIND = r"[A-Za-z0-9.\-:%\[\]_*]+:(?:[0-9]+|\*)"


def _same_path(a: str | Path, b: str | Path) -> bool:
    """Whether two paths name one place (neither need exist)."""
    return Path(a).resolve() == Path(b).resolve()


def run_live(args, bind: str) -> int:
    from rich.console import Console

    from roundhouse.runtime.files import check_output_file, make_folder, results_folder, writing
    from roundhouse.runtime.serve import serve
    from roundhouse.runtime.simulate import load_cluster
    from roundhouse.wire.security import ServerSecurity

    _fill_live_defaults(args)
    quiet = getattr(args, "quiet", False)  # (`serve` has no --quiet)
    # (--quiet prints nothing but errors: the scheduler's log too, unless --log-level says otherwise)
    setup_logging("error" if quiet and args.log_level == "info" else args.log_level)
    check_named(args, "keys", "journal", "out")
    check_bind(bind, "--live" if getattr(args, "live", None) else "--bind")
    security = ServerSecurity.choose(args.keys, args.insecure, bind)
    options = live_options(args)
    until = seconds(args.until, "--until", endless=True)
    graph = compile_with_overrides(args)
    cluster = load_cluster(graph, args.cluster)
    # The checkpoint folder is made if needed (jobs write there); an explicit --journal must be
    # in an existing folder, or in that checkpoint folder, so a mistyped path is an error rather
    # than a new folder tree. Every path is checked before a folder is made (a journal in the
    # checkpoint folder made here, once it is), and a folder made for a run that never began is
    # removed however serve ends.
    fresh_checkpoints = not Path(args.checkpoints).exists()
    journal_later = args.journal is not None and fresh_checkpoints and _same_path(Path(args.journal).parent, args.checkpoints)
    journal = check_output_file(args.journal, "--journal") if args.journal is not None and not journal_later else None
    fresh_out = bool(args.out) and not Path(args.out).exists()
    served = False
    try:
        checkpoints = make_folder(args.checkpoints, "--checkpoints")
        if args.journal is not None:  # (again: the checkpoint folder just made may be where it was to go)
            journal = check_output_file(args.journal, "--journal")
        if args.out:
            results_folder(args.out, "--out", "run")
        explain = bool(args.out) and getattr(args, "explain", True)  # (`serve` has no --no-explain)
        result = serve(
            graph,
            bind,
            security,
            journal or checkpoints / "roundhouse-journal.sqlite",
            options,
            cluster=cluster,
            until=until,
            explain=explain,
        )
        served = True
    finally:
        for fresh, folder in ((fresh_checkpoints, args.checkpoints), (fresh_out and not served, args.out)):
            if fresh and Path(folder).is_dir() and not any(Path(folder).iterdir()):
                Path(folder).rmdir()  # (the results folder stays for the results about to be written)
    if not quiet:
        print_summary(Console(stderr=True), graph, cluster, result, live=True)
    if args.out:
        with writing(args.out):
            write_results(Path(args.out), graph, cluster, result, trace=args.trace)
    return 0
