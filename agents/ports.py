"""Where rendezvous ports for multi-worker jobs started on this machine are drawn from.

A job's rank 0 listens on its rendezvous port some time after the port was chosen. The system
gives every outgoing connection a port from its ephemeral range, and one given in between makes
the job fail with "address already in use"; ports below that range are given to no one
unasked."""

from __future__ import annotations

from pathlib import Path

LOWEST = 10000  # (below it, ports that well-known services are registered for are more common)


def first_outgoing_port() -> int:
    """The lowest port the system gives outgoing connections (Linux's default, 32768, where
    the system does not say)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768
