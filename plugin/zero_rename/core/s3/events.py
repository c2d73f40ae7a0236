"""The light client's events: botocore's hierarchical event hooks, without botocore's.

Whoever counts, slows or fails requests registers on a client's
``meta.events`` (the request statistics of a benchmark, the suite's faults), on
botocore's client and the light client alike. botocore's emitter module imports
its ``utils`` (some forty modules), which a fresh process on the light path
never needs otherwise. :class:`Events` keeps the part of botocore's
``HierarchicalEmitter`` those callers use, with its semantics:

- a handler registered for ``before-call.s3`` is called for
  ``before-call.s3.PutObject`` too; the most specific handlers first, in the
  order they were registered (``register_first`` ahead), and ``*`` matches any
  one part of a name;
- every handler gets the event's name as ``event_name`` with the arguments;
- a ``unique_id`` registers a handler once, and unregisters it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

Handler = Callable[..., Any]
_FIRST, _MIDDLE = 0, 1


class Events:
    """Handlers by event name (dot-separated parts); thread-safe."""

    def __init__(self) -> None:
        # (name parts, position, sequence, handler, unique id)
        self._handlers: list[tuple[tuple[str, ...], int, int, Handler, str | None]] = []
        self._sequence = 0
        self._lock = threading.Lock()

    def register(self, event_name: str, handler: Handler, unique_id: str | None = None) -> None:
        self._add(event_name, handler, unique_id, _MIDDLE)

    def register_first(
        self, event_name: str, handler: Handler, unique_id: str | None = None
    ) -> None:
        self._add(event_name, handler, unique_id, _FIRST)

    def unregister(
        self, event_name: str, handler: Handler | None = None, unique_id: str | None = None
    ) -> None:
        """Remove the handler registered for ``event_name`` under ``unique_id``
        (or, without one, that handler); nothing if there is none."""
        parts = tuple(event_name.split("."))
        with self._lock:
            for entry in self._handlers:
                same = entry[4] == unique_id if unique_id is not None else entry[3] == handler
                if entry[0] == parts and same:
                    self._handlers.remove(entry)
                    return

    def _add(self, event_name: str, handler: Handler, unique_id: str | None, where: int) -> None:
        parts = tuple(event_name.split("."))
        with self._lock:
            if unique_id is not None and any(
                e[0] == parts and e[4] == unique_id for e in self._handlers
            ):
                return  # botocore registers a unique id once
            self._sequence += 1
            self._handlers.append((parts, where, self._sequence, handler, unique_id))

    def emit(self, event_name: str, **kwargs: Any) -> list[tuple[Handler, Any]]:
        """Call every handler of ``event_name``; their (handler, response) pairs."""
        parts = event_name.split(".")
        with self._lock:
            matching = [e for e in self._handlers if _matches(e[0], parts)]
        # Most specific first (the longest name), then by position and order.
        matching.sort(key=lambda e: (-len(e[0]), e[1], e[2]))
        kwargs["event_name"] = event_name
        return [(entry[3], entry[3](**kwargs)) for entry in matching]


def _matches(registered: tuple[str, ...], parts: list[str]) -> bool:
    """Whether a handler for ``registered`` hears an event named by ``parts``."""
    return len(registered) <= len(parts) and all(
        r in ("*", p) for r, p in zip(registered, parts, strict=False)
    )
