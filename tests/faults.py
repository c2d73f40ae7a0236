"""Fault injection at an exact S3 call, through botocore's event hooks.

A real server cannot fail on demand at, say, the third CompleteMultipartUpload;
these hooks can. ``when="before"`` fails the call before it is sent;
``when="after"`` lets the request reach S3 and then loses the response, the
"outcome unknown" case. ``action="exit"`` ends the process on the spot, as a
killed worker would, with no cleanup handler running.

Job commit sends CompleteMultipartUpload outside botocore (the light request
path), so faults on that operation are also hooked there, for the same client.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from zero_rename.core.s3.completers import OPERATION as LIGHT_OP
from zero_rename.core.s3.completers import add_request_hook, remove_request_hook

CRASH_EXIT_CODE = 86


class Fault:
    def __init__(
        self,
        op: str,
        when: str,
        nth: int,
        times: int,
        action: str,
        key_contains: str | None,
        code: str,
        status: int,
    ) -> None:
        self.op, self.when, self.nth, self.times, self.action = op, when, nth, times, action
        self.key_contains, self.code, self.status = key_contains, code, status
        self.seen = 0
        self.fired = 0
        self._lock = threading.Lock()

    def mark(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        """Runs before the request is built: pick out the calls on matching keys."""
        key = str(params.get("Key", ""))
        context[f"fault-{id(self)}"] = self.key_contains is None or self.key_contains in key

    def __call__(self, context: dict[str, Any], **_: Any) -> None:
        if not context.get(f"fault-{id(self)}"):
            return
        with self._lock:
            self.seen += 1
            if self.seen < self.nth or self.fired >= self.times:
                return
            self.fired += 1
        if self.action == "exit":
            os._exit(CRASH_EXIT_CODE)
        raise ClientError(
            {
                "Error": {
                    "Code": self.code,
                    "Message": f"injected fault in {self.op} #{self.seen}",
                },
                "ResponseMetadata": {"HTTPStatusCode": self.status},
            },
            self.op,
        )


def inject(
    client: Any,
    op: str,
    when: str = "before",
    nth: int = 1,
    times: int = 1,
    action: str = "raise",
    key_contains: str | None = None,
    code: str = "InternalError",
    status: int = 500,
) -> Fault:
    """Fail the ``nth`` matching call of ``op`` (and the next ``times - 1``) on this client."""
    fault = Fault(op, when, nth, times, action, key_contains, code, status)
    event = "before-call" if when == "before" else "after-call"
    client.meta.events.register(
        f"before-parameter-build.s3.{op}", fault.mark, unique_id=f"mark-{id(fault)}"
    )
    client.meta.events.register(f"{event}.s3.{op}", fault, unique_id=f"fault-{id(fault)}")
    _hook_light_path(client, op, fault, when)
    return fault


def _hook_light_path(client: Any, op: str, target: Any, when: str) -> None:
    """The same fault (or pause) on the light path's requests for ``client``."""
    if op != LIGHT_OP:
        return

    def hook(stage: str, key: str, context: dict[str, Any]) -> None:
        if stage == "before":
            target.mark(params={"Key": key}, context=context)
        if stage == when:
            target(context=context)

    target.light_hook = hook
    add_request_hook(client, hook)


def clear(client: Any, fault: Fault) -> None:
    if getattr(fault, "light_hook", None) is not None:
        remove_request_hook(client, fault.light_hook)
    event = "before-call" if fault.when == "before" else "after-call"
    client.meta.events.unregister(
        f"before-parameter-build.s3.{fault.op}", unique_id=f"mark-{id(fault)}"
    )
    client.meta.events.unregister(f"{event}.s3.{fault.op}", unique_id=f"fault-{id(fault)}")


def run_until_crash(target: Callable[[], Any]) -> int:
    """Run ``target`` in a forked child and return its exit code (CRASH_EXIT_CODE if a
    fault with action="exit" fired, 0 if it finished). The child builds its own clients."""
    ctx = multiprocessing.get_context("fork")

    def main() -> None:
        target()
        os._exit(0)

    proc = ctx.Process(target=main)
    proc.start()
    proc.join(300)
    assert proc.exitcode is not None, "child did not finish"
    return proc.exitcode


class Pause:
    """Holds the ``nth`` matching call of an operation until released: a step of
    one process frozen at an exact request while another process races it."""

    def __init__(self, op: str, nth: int, key_contains: str | None, timeout: float) -> None:
        self.op, self.nth, self.key_contains, self.timeout = op, nth, key_contains, timeout
        self.reached = threading.Event()
        self._go = threading.Event()
        self._seen = 0
        self._lock = threading.Lock()

    def mark(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        key = str(params.get("Key", "")) + str(params.get("Prefix", ""))
        context[f"pause-{id(self)}"] = self.key_contains is None or self.key_contains in key

    def __call__(self, context: dict[str, Any], **_: Any) -> None:
        if not context.get(f"pause-{id(self)}"):
            return
        with self._lock:
            self._seen += 1
            if self._seen != self.nth:
                return
        self.reached.set()
        if not self._go.wait(self.timeout):
            raise TimeoutError(f"paused {self.op} was never released")

    def release(self) -> None:
        self._go.set()

    def __enter__(self) -> Pause:
        return self

    def __exit__(self, *_: object) -> None:
        # Whatever the test's outcome, never leave a thread held until the timeout.
        self.release()


def pause(
    client: Any, op: str, nth: int = 1, key_contains: str | None = None, timeout: float = 120.0
) -> Pause:
    """Hold the ``nth`` call of ``op`` (on keys or prefixes containing ``key_contains``)
    before it is sent, until ``release()``."""
    held = Pause(op, nth, key_contains, timeout)
    client.meta.events.register(
        f"before-parameter-build.s3.{op}", held.mark, unique_id=f"pmark-{id(held)}"
    )
    client.meta.events.register(f"before-call.s3.{op}", held, unique_id=f"pause-{id(held)}")
    _hook_light_path(client, op, held, "before")
    return held


class Act:
    """Runs ``action(key)`` just before the ``nth`` matching call of an operation is
    sent: what another process does at an exact point (an upload aborted by hand
    while a commit completes the others)."""

    def __init__(
        self, op: str, nth: int, action: Callable[[str], None], key_contains: str | None
    ) -> None:
        self.op, self.nth, self.action, self.key_contains = op, nth, action, key_contains
        self.seen = 0
        self.fired = 0
        self._lock = threading.Lock()

    def mark(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        key = str(params.get("Key", ""))
        matches = self.key_contains is None or self.key_contains in key
        context[f"act-{id(self)}"] = key if matches else None

    def __call__(self, context: dict[str, Any], **_: Any) -> None:
        key = context.get(f"act-{id(self)}")
        if key is None:
            return
        with self._lock:
            self.seen += 1
            if self.seen != self.nth:
                return
            self.fired += 1
        self.action(key)


def act_at(
    client: Any,
    op: str,
    action: Callable[[str], None],
    nth: int = 1,
    key_contains: str | None = None,
) -> Act:
    """Run ``action(key)`` before the ``nth`` call of ``op`` on this client is sent."""
    act = Act(op, nth, action, key_contains)
    client.meta.events.register(
        f"before-parameter-build.s3.{op}", act.mark, unique_id=f"amark-{id(act)}"
    )
    client.meta.events.register(f"before-call.s3.{op}", act, unique_id=f"act-{id(act)}")
    _hook_light_path(client, op, act, "before")
    return act
