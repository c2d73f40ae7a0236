"""``zero-rename s3 serve``: the embedded S3 server (SeaweedFS) in the foreground."""

from __future__ import annotations

import argparse
import errno
import json
import logging
import os
import signal
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from zero_rename.cli.arguments import Subcommands, command, command_group
from zero_rename.cli.context import Context
from zero_rename.cli.output import Output, Result
from zero_rename.core import check_bucket_name
from zero_rename.embedded_s3 import EmbeddedS3
from zero_rename.errors import ConfigError, ZeroRenameError

log = logging.getLogger(__name__)

# The server is checked this often while serving; this many failed checks in
# a row mean it is gone.
HEALTH_INTERVAL = 2.0
HEALTH_FAILURES = 3


def register(groups: Subcommands, common: argparse.ArgumentParser) -> None:
    commands = command_group(groups, "s3", "the embedded S3 server")
    serve = command(
        commands,
        "serve",
        common,
        run_serve,
        help="run SeaweedFS on loopback until Ctrl-C",
        description="Run an S3 server (SeaweedFS) on 127.0.0.1 in the foreground, print how "
        "to use it, and stop it cleanly on Ctrl-C or SIGTERM. With --json, one "
        "line of JSON describes the server once it is ready.",
    )
    serve.add_argument(
        "--dir",
        metavar="DIR",
        help="keep the data in DIR (default: a temporary directory, removed at stop)",
    )
    serve.add_argument(
        "--bucket",
        action="append",
        default=[],
        metavar="NAME",
        help="create this bucket at start (repeatable)",
    )


def run_serve(ctx: Context, args: argparse.Namespace) -> Result:
    buckets = tuple(check_bucket_name(b, "--bucket") for b in args.bucket)
    server = EmbeddedS3(data_dir=data_dir(args.dir), buckets=buckets)
    with stop_signals() as stop:
        # SeaweedFS takes seconds to start (and its buckets to be made).
        with ctx.out.status("starting the S3 server (SeaweedFS)"):
            server.start()
        try:
            announce(ctx.out, server, kept=bool(args.dir))
            serve_until(stop, server.endpoint_url)
        finally:
            server.stop()
    ctx.out.say("S3 server stopped")
    return Result(None)


def data_dir(text: str | None) -> str | None:
    """``--dir``, created if need be; a path that cannot be a writable directory
    (a file on the way, no permission) is bad input, said in one line."""
    if text is None:
        return None
    path = Path(text)
    try:
        if not text.strip():
            raise ValueError("empty path")
        path.mkdir(parents=True, exist_ok=True)
        if not os.access(path, os.W_OK | os.X_OK):
            raise PermissionError(errno.EACCES, "not writable")
    except (OSError, ValueError) as exc:
        why = getattr(exc, "strerror", None) or str(exc)
        raise ConfigError(f"--dir {text[:200]!r} cannot hold the data: {why}") from None
    return text


def announce(out: Output, server: EmbeddedS3, kept: bool) -> None:
    """How to use the server: endpoint and the environment for boto3, pyarrow and zero-rename."""
    env = server.environment()
    if out.json_mode:
        # One line, flushed: a script reads it and goes on while we serve.
        out.console.file.write(
            _one_line(
                {
                    "endpoint_url": server.endpoint_url,
                    "pid": server.pid,
                    "data_dir": server.data_dir,
                    "data_kept": kept,
                    "buckets": list(server.buckets),
                    "environment": env,
                }
            )
            + "\n"
        )
        out.console.file.flush()
        return
    out.say(f"S3 server (SeaweedFS) listening on {server.endpoint_url}", style="bold")
    out.fields(
        [
            ("data", f"{server.data_dir}" + ("" if kept else " (temporary, removed at stop)")),
            ("buckets", ", ".join(server.buckets) or "none yet"),
        ]
    )
    out.say("use it from another shell with:")
    for name, value in env.items():
        out.say(f"  export {name}={value}")
    out.say("press Ctrl-C to stop")


def _one_line(data: dict[str, Any]) -> str:
    return json.dumps(data, separators=(",", ":"))


@contextmanager
def stop_signals() -> Iterator[threading.Event]:
    """An event set by SIGINT or SIGTERM; the previous handlers come back afterwards."""
    stop = threading.Event()
    previous = {
        sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def serve_until(stop: threading.Event, endpoint_url: str) -> None:
    """Wait for a stop signal; fail if the server stops answering on its own."""
    failures = 0
    while not stop.wait(HEALTH_INTERVAL):
        failures = 0 if answers(endpoint_url) else failures + 1
        if failures >= HEALTH_FAILURES:
            raise ZeroRenameError(f"the S3 server at {endpoint_url} stopped answering")
    log.info("stop requested")


def answers(endpoint_url: str) -> bool:
    # An unsigned request gets an S3 error document while the server is up.
    try:
        urllib.request.urlopen(endpoint_url + "/", timeout=2)
        return True
    except urllib.error.HTTPError as exc:
        return exc.code in (400, 403)
    except OSError:
        return False
