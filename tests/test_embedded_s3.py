"""The embedded SeaweedFS starts again on other ports when one it picked was taken
before it could bind it (an outgoing connection's source port, often), and ends
with the process that started it, however that one ends."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

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


# A process that starts the server from a thread that ends at once (the kernel's
# parent-death signal follows the thread that started a child), says the server's
# pid, checks it answers, and waits to be killed.
_PARENT = """
import sys, threading, time
from zero_rename.embedded_s3 import EmbeddedS3
server = EmbeddedS3()
starter = threading.Thread(target=server.start)
starter.start()
starter.join()
time.sleep(0.5)
server.client().list_buckets()
print(server.pid, server.data_dir, flush=True)
time.sleep(300)
"""


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a Linux parent-death signal")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_the_server_ends_with_the_process_that_started_it(sig: signal.Signals) -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    server, data_dir = 0, ""
    try:
        assert parent.stdout is not None
        line = parent.stdout.readline()
        assert line.split()[0].isdigit(), line
        server, data_dir = int(line.split()[0]), line.split()[1]
        assert alive(server)
        parent.send_signal(sig)
        assert parent.wait(30) == -sig
        deadline = time.monotonic() + 15
        while alive(server) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(server), f"SeaweedFS (pid {server}) outlived its parent"
    finally:
        for group in (parent.pid, server):
            if group and alive(group):  # whatever failed, nothing is left running
                os.killpg(group, signal.SIGKILL)
        if data_dir:  # nobody was left to remove it
            shutil.rmtree(data_dir, ignore_errors=True)
