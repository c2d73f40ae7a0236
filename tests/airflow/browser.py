"""Headless Chromium driven over the DevTools protocol: enough to load a page as a user would.

Debian's ``chromium`` is started with remote debugging on a free loopback port
(``--remote-debugging-port=0``; Chromium writes the port it chose to
``DevToolsActivePort`` in its profile). Commands go over the page target's
WebSocket with the ``websockets`` package that Airflow's server already brings.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

from websockets.sync.client import ClientConnection, connect

from zero_rename.embedded_s3 import stop_process_group

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
]


class Browser:
    """One headless Chromium with one page."""

    def __init__(self, timeout: float = 30.0) -> None:
        self.timeout = timeout
        self.profile = Path(tempfile.mkdtemp(prefix="zero-rename-chromium-"))
        self.proc = subprocess.Popen(
            [CHROMIUM, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._ids = itertools.count(1)
        # The connection entered as a context manager (websockets 17.1 deprecates a
        # bare connect()), left by close().
        self._connection = contextlib.ExitStack()
        self.ws: ClientConnection = self._connection.enter_context(
            connect(self._page_socket(), max_size=None, open_timeout=timeout)
        )
        self.send("Page.enable")
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False},
        )

    def _page_socket(self) -> str:
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if port_file.exists() and port_file.read_text().strip():
                port = port_file.read_text().split()[0]
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as r:
                    pages = [t for t in json.load(r) if t.get("type") == "page"]
                if pages:
                    return str(pages[0]["webSocketDebuggerUrl"])
            time.sleep(0.1)
        raise TimeoutError("Chromium did not open its DevTools port")

    def send(
        self, method: str, params: dict[str, Any] | None = None, wait_event: str | None = None
    ) -> dict[str, Any]:
        """Send a command; return its result, or with ``wait_event`` that event's params."""
        message_id = next(self._ids)
        self.ws.send(json.dumps({"id": message_id, "method": method, "params": params or {}}))
        result: dict[str, Any] | None = None
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            message = json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            if message.get("id") == message_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                result = message.get("result", {})
                if wait_event is None:
                    return result
            elif wait_event and message.get("method") == wait_event and result is not None:
                return dict(message.get("params", {}))
        raise TimeoutError(f"{method}: no answer within {self.timeout} s")

    def set_cookie(self, name: str, value: str, url: str) -> None:
        self.send(
            "Network.setCookie",
            {"name": name, "value": value, "url": url, "httpOnly": True, "sameSite": "Lax"},
        )

    def goto(self, url: str) -> None:
        self.send("Page.navigate", {"url": url}, wait_event="Page.loadEventFired")

    def click(self, selector: str) -> None:
        """Click the element ``selector`` finds, as a user would, and wait for the
        page the click leads to (a link followed, a form posted)."""
        self.send(
            "Runtime.evaluate",
            {"expression": f"document.querySelector({json.dumps(selector)}).click()"},
            wait_event="Page.loadEventFired",
        )

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        return result.get("result", {}).get("value")

    def text(self) -> str:
        return str(self.evaluate("document.body ? document.body.innerText : ''"))

    def screenshot(self, path: Path) -> None:
        """The whole page, not only the window."""
        data = self.send(
            "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}
        )["data"]
        path.write_bytes(base64.b64decode(data))

    def screenshot_of(self, path: Path, selector: str, margin: int = 8) -> None:
        """Only the element ``selector`` finds (with a margin), at its place on the page."""
        box = self.evaluate(
            f"(() => {{ const r = document.querySelector({json.dumps(selector)})"
            ".getBoundingClientRect(); return [r.left + scrollX, r.top + scrollY, "
            "r.width, r.height]; })()"
        )
        x, y, width, height = box
        clip = {
            "x": max(0, x - margin),
            "y": max(0, y - margin),
            "width": width + 2 * margin,
            "height": height + 2 * margin,
            "scale": 1,
        }
        data = self.send(
            "Page.captureScreenshot",
            {"format": "png", "captureBeyondViewport": True, "clip": clip},
        )["data"]
        path.write_bytes(base64.b64decode(data))

    def prefer_color_scheme(self, scheme: str) -> None:
        """What the page's ``prefers-color-scheme`` says from now on: light or dark."""
        self.send(
            "Emulation.setEmulatedMedia",
            {"features": [{"name": "prefers-color-scheme", "value": scheme}]},
        )

    def close(self) -> None:
        try:
            self._connection.close()
        finally:
            stop_process_group(self.proc, timeout=10)
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
