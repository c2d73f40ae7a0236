"""The S3 implementations the behaviour suite runs against.

SeaweedFS (:class:`zero_rename.embedded_s3.EmbeddedS3`) is a real S3 server;
moto's server (:class:`MotoS3`) answers with AWS's error codes where SeaweedFS
does not (If-Match on a missing key is 404 NoSuchKey, aborting a completed
upload is NoSuchUpload), and has bugs of its own. Both have the same surface,
:class:`S3Server`, so a fixture can hand either to a test.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, Self

from zero_rename.embedded_s3 import ServerProcess, free_ports, wait_ready

log = logging.getLogger(__name__)

# AWS: every part but the last must be at least 5 MiB (EntityTooSmall at
# complete). moto enforces the same by default; it is set explicitly so that
# an S3_UPLOAD_PART_MIN_SIZE in the caller's environment cannot lower it.
AWS_MIN_PART_SIZE = 5 * 1024 * 1024

# The implementations tests/core runs on, by the ids its tests carry.
BACKENDS = ("seaweedfs", "moto")


class S3Server(Protocol):
    """What a test needs of an S3 server, whichever implementation it is."""

    access_key: str
    secret_key: str

    @property
    def endpoint_url(self) -> str: ...

    def environment(self) -> dict[str, str]: ...

    def create_bucket(self, name: str) -> None: ...

    def client(self) -> Any: ...


@dataclass
class MotoS3(ServerProcess):
    """moto's S3 in a separate process (``python -m moto.server``) on 127.0.0.1.

    A process of its own, not moto's ThreadedMotoServer: the suite forks
    crash children (tests/faults.py), which must not inherit a server thread
    half-way through a request, and an in-process server would contend for
    the test's GIL, so timings would measure the test as much as the server.
    """

    # moto accepts any credentials (it verifies no signature unless IAM
    # emulation is switched on); these only have to be present for botocore.
    access_key: str = "zero-rename-moto"
    secret_key: str = "zero-rename-moto-secret"
    _port: int = field(default=0, repr=False)
    startup_seconds: float | None = field(default=None, repr=False)

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    def start(self) -> Self:
        if self._proc is not None:
            return self
        began = time.monotonic()
        self._tmp = tempfile.mkdtemp(prefix="zero-rename-moto-")
        (self._port,) = free_ports(1)
        log_path = Path(self._tmp) / "moto.log"
        env = {
            **os.environ,
            "S3_UPLOAD_PART_MIN_SIZE": str(AWS_MIN_PART_SIZE),
            # moto keeps an object in memory up to a buffer size and spills
            # the rest to a temporary file; keep those files in our directory
            # so that stop() removes them even if the server is killed.
            "TMPDIR": self._tmp,
        }
        cmd = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self._port)]
        self._spawn(cmd, env, log_path)
        assert self._proc is not None
        log.info("starting moto (pid %s) on port %s", self._proc.pid, self._port)
        try:
            self._wait_ready(log_path)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        log.info("moto is ready at %s after %.2fs", self.endpoint_url, self.startup_seconds)
        return self

    def create_bucket(self, name: str) -> None:
        try:
            self.client().create_bucket(Bucket=name)
        except Exception as exc:
            code = getattr(exc, "response", {}).get("Error", {}).get("Code", "")
            if code not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                raise

    def _wait_ready(self, log_path: Path) -> None:
        assert self._proc is not None
        wait_ready(self._proc, self._answers, log_path, self.startup_timeout, "moto server")

    def _answers(self) -> bool:
        # Any HTTP answer, even an error document, means werkzeug is serving.
        try:
            urllib.request.urlopen(self.endpoint_url + "/moto-api/data.json", timeout=1)
            return True
        except urllib.error.HTTPError:
            return True
        except OSError:
            return False

    def stop(self) -> None:
        self._stop_process("moto")  # moto's server turns SIGTERM into a clean exit
