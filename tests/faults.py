"""Fault injection at an exact S3 call, through botocore's event hooks.

A real server cannot fail on demand at, say, the third CompleteMultipartUpload;
these hooks can. ``when="before"`` fails the call before it is sent;
``when="after"`` lets the request reach S3 and then loses the response, the
"outcome unknown" case. ``action="exit"`` ends the process on the spot, as a
killed worker would, with no cleanup handler running.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

CRASH_EXIT_CODE = 86


class Fault:
    def __init__(self, op: str, when: str, nth: int, times: int, action: str) -> None:
        self.op, self.when, self.nth, self.times, self.action = op, when, nth, times, action
        self.seen = 0
        self.fired = 0
        self._lock = threading.Lock()

    def __call__(self, **_: Any) -> None:
        with self._lock:
            self.seen += 1
            if self.seen < self.nth or self.fired >= self.times:
                return
            self.fired += 1
        if self.action == "exit":
            os._exit(CRASH_EXIT_CODE)
        raise ClientError({"Error": {"Code": "InternalError",
                                     "Message": f"injected fault in {self.op} #{self.seen}"},
                           "ResponseMetadata": {"HTTPStatusCode": 500}}, self.op)


def inject(client: Any, op: str, when: str = "before", nth: int = 1, times: int = 1,
           action: str = "raise") -> Fault:
    """Fail the ``nth`` call of ``op`` (and the next ``times - 1``) on this client."""
    fault = Fault(op, when, nth, times, action)
    event = "before-call" if when == "before" else "after-call"
    client.meta.events.register(f"{event}.s3.{op}", fault, unique_id=f"fault-{id(fault)}")
    return fault


def clear(client: Any, fault: Fault) -> None:
    event = "before-call" if fault.when == "before" else "after-call"
    client.meta.events.unregister(f"{event}.s3.{fault.op}", unique_id=f"fault-{id(fault)}")


def run_until_crash(target: Callable[[], Any]) -> int:
    """Run ``target`` in a forked child and return its exit code (CRASH_EXIT_CODE if a
    fault with action="exit" fired). The child must build its own clients."""
    ctx = multiprocessing.get_context("fork")
    proc = ctx.Process(target=target)
    proc.start()
    proc.join(300)
    assert proc.exitcode is not None, "child did not finish"
    return proc.exitcode
