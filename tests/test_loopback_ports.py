"""The loopback cluster's rendezvous ports lie below the system's ephemeral ports: an outgoing
connection could take one of those between the scheduler's choice and the job's bind (a job then
failed with "address already in use")."""

from __future__ import annotations

from pathlib import Path

from roundhouse.tools.loopback import rendezvous_base


def test_rendezvous_ports_are_drawn_below_the_ephemeral_ports():
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    bases = {rendezvous_base() for _ in range(200)}
    assert all(10000 <= base and base + 500 <= low for base in bases)
    assert len(bases) > 100  # (clusters started side by side rarely share ports)
