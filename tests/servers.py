"""The S3 implementations the behaviour suite runs against.

SeaweedFS (:class:`zero_rename.embedded_s3.EmbeddedS3`) is a real S3 server;
moto's server (:class:`MotoS3`) answers with AWS's error codes where SeaweedFS
does not (If-Match on a missing key is 404 NoSuchKey, aborting a completed
upload is NoSuchUpload), and has bugs of its own; LocalStack's S3
(:class:`LocalStackS3`) answered like AWS on every point the protocol leans on,
with conditional writes that hold under races, and needs Python 3.13 (a venv of
its own, ``.venv-localstack``, which ``make venv`` builds where Python 3.13 is
found). All have the same surface, :class:`S3Server`, so a fixture can hand any
of them to a test.
"""

from __future__ import annotations

import glob
import json
import logging
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, Self

from zero_rename.embedded_s3 import (
    ServerProcess,
    StartStop,
    free_ports,
    stop_process_group,
    wait_ready,
)

log = logging.getLogger(__name__)

# AWS: every part but the last must be at least 5 MiB (EntityTooSmall at
# complete). moto enforces the same by default; it is set explicitly so that
# an S3_UPLOAD_PART_MIN_SIZE in the caller's environment cannot lower it.
AWS_MIN_PART_SIZE = 5 * 1024 * 1024

# The implementations tests/core runs on, by the ids its tests carry.
BACKENDS = ("seaweedfs", "moto", "localstack")

ROOT = Path(__file__).resolve().parent.parent
# LocalStack's venv (Python 3.13), built by make venv from requirements-localstack.txt.
LOCALSTACK_VENV = ROOT / ".venv-localstack"
# Where an interpreter for it may be: on PATH (a pyenv shim there may fail to
# run: it is tried, not trusted), or in pyenv's versions. The Makefile looks in
# the same places.
_PYTHON313 = ("python3.13", "~/.pyenv/versions/3.13*/bin/python3.13")


def create_bucket(client: Any, name: str) -> None:
    """Create a bucket; one that is already there is no error."""
    try:
        client.create_bucket(Bucket=name)
    except Exception as exc:
        code = getattr(exc, "response", {}).get("Error", {}).get("Code", "")
        if code not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
            raise


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
        create_bucket(self.client(), name)

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


def python313() -> str | None:
    """A Python 3.13 interpreter that runs, or None."""
    for pattern in _PYTHON313:
        candidates = sorted(glob.glob(os.path.expanduser(pattern))) or [shutil.which(pattern)]
        for candidate in candidates:
            if candidate and _runs(candidate):
                return candidate
    return None


def _runs(python: str) -> bool:
    try:
        done = subprocess.run([python, "--version"], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and done.stdout.startswith(b"Python 3.13")


@dataclass
class LocalStackS3(ServerProcess):
    """LocalStack's S3 alone, in host mode (no Docker), on 127.0.0.1: one Python
    3.13 process from ``.venv-localstack``, ready in 5 to 15 s, about 500 MB.

    Hypercorn, not the default Twisted server, which ignores the host of
    ``GATEWAY_LISTEN`` and listens on every interface. ``OVERRIDE_IN_DOCKER=0``
    and ``FILESYSTEM_ROOT`` keep its files in a directory of ours (otherwise it
    believes it runs in a container and writes under /var/lib/localstack); no
    DNS server, no analytics events, no download of a TLS certificate.
    """

    python: str = str(LOCALSTACK_VENV / "bin" / "python")
    # Any credentials work; the access key only names the account.
    access_key: str = "zero-rename-localstack"
    secret_key: str = "zero-rename-localstack-secret"
    _port: int = field(default=0, repr=False)
    startup_seconds: float | None = field(default=None, repr=False)

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    def start(self) -> Self:
        if self._proc is not None:
            return self
        began = time.monotonic()
        self._tmp = tempfile.mkdtemp(prefix="zero-rename-localstack-")
        (self._port,) = free_ports(1)
        log_path = Path(self._tmp) / "localstack.log"
        root = Path(self._tmp) / "root"
        env = {
            # Not the suite's environment: its AWS_* point at SeaweedFS.
            **{k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TZ")},
            "TMPDIR": self._tmp,
            "GATEWAY_SERVER": "hypercorn",
            "GATEWAY_LISTEN": f"127.0.0.1:{self._port}",
            "SERVICES": "s3",
            "EAGER_SERVICE_LOADING": "1",
            "DISABLE_EVENTS": "1",
            "SKIP_SSL_CERT_DOWNLOAD": "1",
            "DNS_ADDRESS": "0",
            "OVERRIDE_IN_DOCKER": "0",
            "FILESYSTEM_ROOT": str(root),
        }
        self._spawn([self.python, "-m", "localstack.runtime.main"], env, log_path)
        assert self._proc is not None
        log.info("starting LocalStack (pid %s) on port %s", self._proc.pid, self._port)
        try:
            wait_ready(self._proc, self._answers, log_path, self.startup_timeout, "LocalStack")
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        log.info("LocalStack is ready at %s after %.2fs", self.endpoint_url, self.startup_seconds)
        return self

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.endpoint_url}/_localstack/health", timeout=1) as r:
                services = json.loads(r.read()).get("services", {})
        except (OSError, ValueError):
            return False
        return services.get("s3") in ("running", "available")

    def create_bucket(self, name: str) -> None:
        create_bucket(self.client(), name)

    def stop(self) -> None:
        self._stop_process("LocalStack")


# The Debian packages Ceph RGW needs here (bookworm: Pacific, 16.2.15).
CEPH_PACKAGES = ("radosgw", "ceph-mon", "ceph-osd")
_CEPH_PROGRAMS = ("ceph", "ceph-authtool", "monmaptool", "ceph-mon", "ceph-osd", "radosgw")


def ceph_missing() -> list[str]:
    """The Ceph programs not on PATH."""
    return [p for p in _CEPH_PROGRAMS + ("radosgw-admin",) if shutil.which(p) is None]


@dataclass
class CephRGW(StartStop):
    """Ceph RGW on 127.0.0.1: one monitor, one OSD keeping its data in memory
    (memstore, at most 4 GiB) and one radosgw (beast), with cephx on (without it
    radosgw hung 300 s authenticating). Ready in about 15 s, about 250 MB in all.

    An older RGW than the stores the protocol targets: it refuses every If-Match
    whose ETag is quoted, ignores conditional completes and answers 500 to a
    complete of an unknown upload. Opt-in (tests/conftest.py): its start costs
    more than the default suite can spend.
    """

    access_key: str = "zero-rename-ceph"
    secret_key: str = "zero-rename-ceph-secret"
    startup_timeout: float = 120.0
    _procs: list[subprocess.Popen[bytes]] = field(default_factory=list, repr=False)
    _tmp: str | None = field(default=None, repr=False)
    _port: int = field(default=0, repr=False)
    startup_seconds: float | None = field(default=None, repr=False)

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    def environment(self) -> dict[str, str]:
        return {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": self.endpoint_url,
        }

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name="us-east-1",
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
        )

    def create_bucket(self, name: str) -> None:
        create_bucket(self.client(), name)

    def start(self) -> Self:
        if self._procs:
            return self
        began = time.monotonic()
        self._tmp = tempfile.mkdtemp(prefix="zero-rename-ceph-")
        try:
            self._bootstrap(Path(self._tmp))
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        log.info("Ceph RGW is ready at %s after %.1fs", self.endpoint_url, self.startup_seconds)
        return self

    def _bootstrap(self, d: Path) -> None:
        for sub in ("mon/a", "osd/0", "rgw", "run", "log"):
            (d / sub).mkdir(parents=True)
        mon, self._port = free_ports(2)
        fsid, conf = uuid.uuid4(), d / "ceph.conf"
        conf.write_text(_CEPH_CONF.format(d=d, fsid=fsid, mon=mon, rgw=self._port))
        values = {"d": d, "conf": conf, "fsid": fsid, "mon": mon, "osd_uuid": uuid.uuid4()}
        for step in _CEPH_STEPS:
            command = shlex.split(step.format(**values).lstrip("& "))
            if step.startswith("&"):
                self._daemon(d, command)
            else:
                self._run(command)
        wait_ready(
            self._procs[-1], self._answers, d / "log/radosgw.out", self.startup_timeout, "radosgw"
        )
        self._run(
            ["radosgw-admin", "-c", str(conf), "user", "create", "--uid=zr", "--display-name=zr",
             f"--access-key={self.access_key}", f"--secret-key={self.secret_key}"]
        )  # fmt: skip

    def _run(self, command: list[str]) -> str:
        done = subprocess.run(command, capture_output=True, timeout=self.startup_timeout)
        if done.returncode != 0:
            raise RuntimeError(
                f"{command[0]} exited with {done.returncode}: {done.stderr.decode()[-1500:]}"
            )
        return done.stdout.decode()

    def _daemon(self, d: Path, command: list[str]) -> None:
        """A daemon in the foreground (-f), leading a process group of its own."""
        with open(d / "log" / f"{command[0]}.out", "ab") as out:
            self._procs.append(
                subprocess.Popen(
                    command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
                )
            )

    def _answers(self) -> bool:
        try:
            urllib.request.urlopen(self.endpoint_url, timeout=1)
            return True
        except urllib.error.HTTPError:
            return True
        except OSError:
            return False

    def stop(self) -> None:
        # Its data lives in memory and in the directory removed below: no graceful stop.
        for proc in reversed(self._procs):
            stop_process_group(proc, timeout=0)
        self._procs.clear()
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None


# One monitor, one OSD (the cluster's first: id 0), one radosgw; "&" marks a daemon.
_CEPH_STEPS = (
    "ceph-authtool --create-keyring {d}/keyring --gen-key -n mon. --cap mon 'allow *'",
    "ceph-authtool {d}/keyring --gen-key -n client.admin --cap mon 'allow *' "
    "--cap osd 'allow *' --cap mgr 'allow *'",
    "monmaptool --create --addv a [v2:127.0.0.1:{mon}] --fsid {fsid} {d}/monmap",
    "ceph-mon -c {conf} --mkfs -i a --monmap {d}/monmap --keyring {d}/keyring",
    "& ceph-mon -c {conf} -i a -f",
    "ceph -c {conf} osd new {osd_uuid}",
    "ceph -c {conf} auth get-or-create osd.0 mon 'allow profile osd' osd 'allow *' "
    "mgr 'allow profile osd' -o {d}/osd/0/keyring",
    "ceph-osd -c {conf} -i 0 --mkfs --osd-uuid {osd_uuid} --keyring {d}/osd/0/keyring",
    "& ceph-osd -c {conf} -i 0 --keyring {d}/osd/0/keyring -f",
    "ceph -c {conf} auth get-or-create client.rgw.a mon 'allow rw' osd 'allow rwx' "
    "-o {d}/rgw/keyring",
    "& radosgw -c {conf} -n client.rgw.a --keyring {d}/rgw/keyring -f",
)

_CEPH_CONF = """[global]
fsid = {fsid}
mon host = v2:127.0.0.1:{mon}
mon initial members = a
public addr = 127.0.0.1
cluster addr = 127.0.0.1
keyring = {d}/keyring
client mount timeout = 30
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
mon allow pool size one = true
mon warn on pool no redundancy = false
mon max pg per osd = 1000
mon data avail warn = 1
osd crush chooseleaf type = 0
run dir = {d}/run
admin socket = {d}/run/$cluster-$name.asok
log file = {d}/log/$cluster-$name.log
pid file = {d}/run/$cluster-$name.pid
ms bind ipv6 = false
ms bind msgr1 = false
[mon]
mon data = {d}/mon/$id
[osd]
osd data = {d}/osd/$id
osd objectstore = memstore
memstore device bytes = 4294967296
osd memory target = 1073741824
[client.rgw.a]
rgw frontends = beast endpoint=127.0.0.1:{rgw}
rgw data = {d}/rgw
"""
