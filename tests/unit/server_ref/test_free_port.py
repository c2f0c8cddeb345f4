"""server_ref.cluster.processes.free_port: ports for child processes come from this
worker's slice below the kernel's ephemeral range, in turn, and each one binds."""

from __future__ import annotations

import socket

from server_ref.cluster import processes


def test_ports_are_below_the_ephemeral_range_distinct_and_bindable() -> None:
    ports = [processes.free_port() for _ in range(50)]
    assert len(set(ports)) == len(ports)
    slice_ = processes._port_slice()
    if slice_ is not None:  # None: the ephemeral range starts too low; the kernel picks
        assert all(p in slice_ for p in ports)
        assert max(ports) < processes._ephemeral_floor()
    for port in ports:
        with socket.socket() as s:
            s.bind((processes.HOST, port))


def test_a_port_in_use_is_passed_over() -> None:
    with socket.socket() as held:
        held.bind((processes.HOST, processes.free_port()))
        held.listen()
        taken = held.getsockname()[1]
        assert taken not in {processes.free_port() for _ in range(20)}
