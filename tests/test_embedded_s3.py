"""The embedded SeaweedFS starts again on other ports when one it picked was taken
before it could bind it (an outgoing connection's source port, often)."""

from __future__ import annotations

import socket

import pytest

from zero_rename import embedded_s3
from zero_rename.embedded_s3 import EmbeddedS3, free_ports

pytestmark = pytest.mark.s3


def test_a_port_taken_between_its_pick_and_its_bind_is_picked_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    taken = held.getsockname()[1]
    picks: list[list[int]] = []

    def first_one_taken(count: int) -> list[int]:
        ports = free_ports(count)
        if not picks:
            ports[0] = taken  # the first pick names a port somebody holds
        picks.append(ports)
        return ports

    monkeypatch.setattr(embedded_s3, "free_ports", first_one_taken)
    try:
        with EmbeddedS3(buckets=("port-retry",)) as server:
            assert len(picks) == 2 and taken not in picks[1]
            assert (
                server.client().head_bucket(Bucket="port-retry")["ResponseMetadata"][
                    "HTTPStatusCode"
                ]
                == 200
            )
    finally:
        held.close()
