"""Shared fixtures: real S3 servers and one local Spark session, each started once
per session when a test first needs it, and a fresh bucket per test.

``s3_backend`` is the server a test runs on. tests/core parametrises it over
every implementation in ``tests.servers.BACKENDS`` (see tests/core/conftest.py),
so the behaviour suite runs on SeaweedFS, on moto and on LocalStack; everywhere
else it is SeaweedFS, once, and ``s3_server`` is SeaweedFS by name for the tests
(Spark, Airflow) that need more of it than the S3 API.

LocalStack runs from its own Python 3.13 venv (``.venv-localstack``, built by
``make venv`` where Python 3.13 is found). Where there is no Python 3.13 its
tests are skipped, saying so; where there is one but no venv, or when CI demands
every test (ZERO_RENAME_TESTS_REQUIRE_ALL), they fail instead.
"""

from __future__ import annotations

import gc
import logging
import os
import re
import shutil
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests import buckets
from tests.jvm import JAVA_OPTIONS
from tests.s3proxy import S3Proxy, proxy_for
from tests.servers import (
    BACKENDS,
    CEPH_PACKAGES,
    LOCALSTACK_VENV,
    CephRGW,
    LocalStackS3,
    MotoS3,
    S3Server,
    ceph_missing,
    python313,
)
from zero_rename.core.committer import Committer
from zero_rename.core.s3.client import StoreConfig
from zero_rename.embedded_s3 import EmbeddedS3

_MARKERS = {
    "unit",
    "s3",
    "spark",
    "airflow",
    "dagster",
    "browser",
    "ceph",
    "soak",
    "peers",
    "extended",
}

# Two task threads and three attempts per task, so that a failed task attempt
# is retried as on a cluster.
SPARK_MASTER = "local[2,3]"

# backend id (a test id in tests/core) -> the session fixture that starts it
_SERVER_FIXTURES = {"seaweedfs": "s3_server", "moto": "moto_s3", "localstack": "localstack_s3"}
assert set(_SERVER_FIXTURES) == set(BACKENDS)
DEFAULT_BACKEND = "seaweedfs"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--s3-backends",
        default=",".join(BACKENDS),
        help="comma-separated S3 implementations tests/core runs on "
        f"(default: {','.join(BACKENDS)}); its tests marked "
        "every_backend run on each, the others on the first",
    )
    parser.addoption(
        "--s3-every-test-on-every-backend",
        action="store_true",
        dest="s3_full_matrix",
        help="run every test of tests/core on each of --s3-backends, "
        "not only those marked every_backend",
    )


def pytest_configure(config: pytest.Config) -> None:
    # Parsed once, here, so that a wrong name is a usage error, not a
    # collection error in every module of tests/core.
    names = [n.strip() for n in str(config.option.s3_backends).split(",") if n.strip()]
    unknown = sorted(set(names) - set(BACKENDS))
    if unknown or not names:
        raise pytest.UsageError(
            f"--s3-backends {config.option.s3_backends!r}: choose from {', '.join(BACKENDS)}"
        )
    config.option.s3_backends = [n for n in BACKENDS if n in names]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    missing = _missing_programs()
    for item in items:
        # Tests that name no marker are unit tests, so `-m unit` selects them.
        if not _MARKERS & {m.name for m in item.iter_markers()}:
            item.add_marker(pytest.mark.unit)
        backend = backend_of(item)
        if backend in ("moto", "localstack"):
            _apply_backend_marks(item, backend)
        if backend in ("moto", "localstack"):  # make test-extended's -m "moto or localstack"
            item.add_marker(getattr(pytest.mark, backend))
        for marker, why in missing.items():
            if item.get_closest_marker(marker) is not None:
                item.add_marker(pytest.mark.skip(reason=why))
        for marker, (variable, why) in _OPT_IN.items():
            if item.get_closest_marker(marker) is not None and not os.environ.get(variable):
                item.add_marker(pytest.mark.skip(reason=f"opt-in ({variable}=1): {why}"))
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: the longest groups first
        full = bool(config.option.s3_full_matrix)
        items.sort(key=lambda item: _group_rank(worker_group(item.nodeid, full)))


def pytest_collection_finish(session: pytest.Session) -> None:
    """A test process holds Airflow, Dagster, Spark's and the formats' modules
    from collection on, and the cyclic collector's passes walked them again and
    again: 4.5 s of 40 s of CPU in a sample of tests/core's and Airflow's tests,
    about 2 s once what collection made is frozen and the young generation is
    10,000 objects (700 by default), which makes a pass about a fourteenth as
    often; garbage is still collected. Spark's, the orchestrators' and the
    benchmarks' own processes keep Python's defaults."""
    gc.freeze()
    gc.set_threshold(10_000, *gc.get_threshold()[1:])


# Tests run only when asked for, by an environment variable: marker -> (variable, why).
# Ceph RGW 16: its packages (about 15 s to install) and its start (about 12 s)
# cost more than the default suite can spend; the fault proxy plays its If-Match.
# The table-format soak runs for minutes (tests/core/tables/test_table_soak.py).
_OPT_IN = {
    "ceph": (
        "ZERO_RENAME_TEST_CEPH",
        "Ceph RGW 16 takes about 12 s to start, and its packages "
        f"({' '.join(CEPH_PACKAGES)}) must be installed",
    ),
    # Minutes of jobs under faults: run on request, its numbers reported.
    "soak": (
        "ZERO_RENAME_TEST_SOAK",
        "a soak of table-format jobs under lost answers and kills takes minutes",
    ),
    # Spark 4.1 with Iceberg and Delta in a JVM of its own (.venv-peers, its jars
    # cached): its start and first reads of each format take about half a minute.
    "peers": (
        "ZERO_RENAME_TEST_PEERS",
        "the JVM engines' reads and writes (make test-peers builds .venv-peers and runs them)",
    ),
    # The long end-to-end scenarios (the plain stack, a stage killed mid-write,
    # the daily DAG's commit killed half-way, Spark Connect's client, dg dev and
    # dagster-webserver, OpenLineage's listener, the commit benchmark's run) and
    # the cells of crossed cases that make test samples: what would take make
    # test past its six minutes on two cores. CI runs them after it.
    "extended": (
        "ZERO_RENAME_TEST_EXTENDED",
        "the long end-to-end scenarios (make test-extended; .ci/run runs them after make test)",
    ),
}

# What a marker's tests need beyond the venv: deploy/system-deps.sh installs it.
_PROGRAMS = {
    "spark": ("java", "Java"),
    "peers": ("java", "Java"),
    "browser": ("chromium", "Chromium"),
}


def _missing_programs() -> dict[str, str]:
    """Marker -> why its tests cannot run here. Empty when CI demands every test
    (ZERO_RENAME_TESTS_REQUIRE_ALL): there a missing program fails the tests."""
    if os.environ.get("ZERO_RENAME_TESTS_REQUIRE_ALL"):
        return {}
    return {
        marker: f"{name} not found ({program} on PATH): deploy/system-deps.sh, which "
        "make test runs, installs it as root with apt-get"
        for marker, (program, name) in _PROGRAMS.items()
        if shutil.which(program) is None
    }


# Under pytest-xdist (make test: -n 3 --dist loadgroup) the tests of a group run
# on one worker, one after another, in file order: those sharing a costly session
# resource (the Spark JVM, Airflow's database and api-server), and the tests of
# any other file, which may share module fixtures or follow each other. Those of
# tests/core and tests/cli spread over the workers one by one, but for the cases
# on LocalStack. The groups are told by node id alone, as the controller knows
# tests by nothing else.
# The first prefix that matches names the group. The Airflow tests are three
# groups, each on one worker with an Airflow database of its own (``airflow db
# migrate``, 5-8 s): the Commits page's (its api-server), the stage killed
# mid-write (two Spark submits), and the rest (the daily DAG's runs); one group
# of them all was the suite's longest chain while the machine's cores idled.
_GROUPS = {
    "tests/spark/": "spark-session",
    "tests/dagster/": "spark-session",
    "tests/airflow/test_commits_page.py": "airflow-page",
    "tests/airflow/test_stage_retry.py": "airflow-stage-retry",
    "tests/airflow/": "airflow",
}
_SPREAD = ("tests/core/", "tests/cli/")
# A test's LocalStack case (its backend id among the ids in brackets): these run
# on one worker, so LocalStack starts once (about 3 s of CPU and 480 MB) rather
# than on every worker; a handful of tests, unless the whole matrix is asked for.
_LOCALSTACK_CASE = re.compile(r"\[(?:[^\]]*-)?localstack(?:-[^\]]*)?\]$")
# The longest groups first, so that the short tests fill the other worker meanwhile.
_LONGEST = (
    "spark-session",
    "tests/deploy/test_plain_stack.py",
    "airflow",
    "airflow-stage-retry",
    "airflow-page",
)


def worker_group(nodeid: str, full_matrix: bool = False) -> str | None:
    """The group a test runs in under pytest-xdist, or None to run it on any worker."""
    path = nodeid.split("::", 1)[0]
    if path.startswith(_SPREAD):
        return "localstack" if not full_matrix and _LOCALSTACK_CASE.search(nodeid) else None
    return next((g for prefix, g in _GROUPS.items() if path.startswith(prefix)), path)


def _group_rank(group: str | None) -> int:
    if group is None:
        return len(_LONGEST) + 1
    return _LONGEST.index(group) if group in _LONGEST else len(_LONGEST)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup`` with the groups of :func:`worker_group`. pytest-xdist's
    own loadgroup marks a grouped test by rewriting an attribute pytest 9 no longer
    reads, so its groups would be lost; its load-by-scope scheduler is given the
    groups as scopes instead."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    full = bool(config.option.s3_full_matrix)

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return worker_group(nodeid, full) or nodeid

    # The workers' collection order is already the longest group first.
    config.option.loadscopereorder = False
    return GroupScheduling(config, log)


def backend_of(item: pytest.Item) -> str | None:
    """The backend a collected test runs on, if it runs on a parametrised one."""
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("s3_backend") if callspec is not None else None


def _apply_backend_marks(item: pytest.Item, backend: str) -> None:
    """A ``moto_xfail`` (``localstack_xfail``) mark applies to a test's moto
    (LocalStack) case only; its SeaweedFS case runs and is checked in full. Strict
    by default, so a release that fixes the behaviour shows up as a failure to
    remove the mark. A race test marked ``atomic_writes`` is skipped on moto,
    whose conditional writes are a check-then-act without a lock: two racing
    writers can both win there, so a race it passes proves nothing and one it
    fails is moto's."""
    if backend == "moto":
        for _mark in item.iter_markers("atomic_writes"):
            item.add_marker(pytest.mark.skip(reason="moto's conditional writes are not atomic"))
    name = {"moto": "moto", "localstack": "LocalStack"}[backend]
    for mark in item.iter_markers(f"{backend}_xfail"):
        item.add_marker(
            pytest.mark.xfail(
                reason=f"{name}: {mark.kwargs['reason']}",
                raises=mark.kwargs.get("raises"),
                strict=mark.kwargs.get("strict", True),
            )
        )


@pytest.fixture(scope="session")
def s3_server() -> Iterator[EmbeddedS3]:
    """The embedded SeaweedFS; its credentials go into the environment for the
    session so that boto3's standard chain, pyarrow and Spark executors (whose
    JVM reads them once, at start) all find them. Tests on another backend
    replace them for their own duration only (see :func:`_backend_environment`)."""
    server = EmbeddedS3()
    # Each worker's SeaweedFS shares two cores with the other workers', Spark and
    # the tests. Given both, Go's scheduler keeps a thread spinning for work after
    # each request; on one, SeaweedFS spends 25 to 40 % less CPU a request here
    # (a put, an upload part, a complete) at the same answer times on loopback.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GOMAXPROCS", "1")  # read once, at the server's start
        server.start()
    with server:
        saved = {k: os.environ.get(k) for k in server.environment()}
        os.environ.update(server.environment())
        yield server
        buckets.finish_emptying()  # before the server stops under it
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="session")
def moto_s3() -> Iterator[MotoS3]:
    """moto's server in a process of its own. Its credentials are not put in the
    environment for the session: they would reach SeaweedFS tests (and a Spark
    JVM started later), which SeaweedFS refuses."""
    with MotoS3() as server:
        yield server


@pytest.fixture(scope="session")
def localstack_s3() -> Iterator[LocalStackS3]:
    """LocalStack's S3 in a process of its own (Python 3.13, ``.venv-localstack``);
    like moto's, its credentials stay out of the session's environment."""
    python = LOCALSTACK_VENV / "bin" / "python"
    if not python.exists():
        _localstack_missing()
    with LocalStackS3(python=str(python)) as server:
        yield server


def _localstack_missing() -> None:
    """Skip (no Python 3.13 here) or fail (there is one, or CI demands every test)."""
    if python313() is None and not os.environ.get("ZERO_RENAME_TESTS_REQUIRE_ALL"):
        pytest.skip(
            "LocalStack needs Python 3.13 and none was found (python3.13 on PATH or "
            "under ~/.pyenv/versions); make venv builds .venv-localstack where it is"
        )
    pytest.fail(
        f"LocalStack's venv {LOCALSTACK_VENV.name} is missing; make venv builds it "
        "(it needs Python 3.13: python3.13 on PATH or under ~/.pyenv/versions)"
    )


@pytest.fixture(scope="session")
def ceph_rgw() -> Iterator[CephRGW]:
    """Ceph RGW 16 (opt-in: tests marked ``ceph``), started once per worker."""
    missing = ceph_missing()
    if missing:
        pytest.fail(
            f"Ceph programs not found ({', '.join(missing)}): as root, apt-get install -y "
            f"--no-install-recommends {' '.join(CEPH_PACKAGES)}"
        )
    with CephRGW() as server:
        yield server


@pytest.fixture(scope="session", autouse=True)
def iceberg_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The embedded Iceberg catalog's directory (``ZERO_RENAME_ICEBERG_HOME``), one
    per session (per xdist worker), never the user's home. Set before Spark's JVM
    starts, so that its Python workers (the writer's job setup and commit) and
    the processes Airflow starts find the same catalog as the test."""
    given = os.environ.get("ZERO_RENAME_ICEBERG_HOME")
    if given:
        yield given
        return
    home = str(tmp_path_factory.mktemp("iceberg-home"))
    os.environ["ZERO_RENAME_ICEBERG_HOME"] = home
    yield home
    os.environ.pop("ZERO_RENAME_ICEBERG_HOME", None)


@pytest.fixture(scope="session")
def spark(s3_server: EmbeddedS3, iceberg_home: str) -> Iterator[Any]:
    """The one local SparkSession of the run (a JVM start takes seconds): the Spark
    tests', and the one the Dagster definitions' PySparkResource finds, as
    ``getOrCreate`` returns the running session.

    Speculation is on for the whole session: Spark never runs a speculative copy
    on the host that already runs the task, so on one machine it changes nothing
    but lets a test check that a straggler under speculation is not written twice.
    """
    # Executors are Python workers forked by the JVM: they need this interpreter
    # (pyarrow, zero_rename) and the S3 credentials the s3_server fixture put in
    # os.environ before the JVM starts.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from zero_rename.spark import register

    session = (
        SparkSession.builder.master(SPARK_MASTER)
        .appName("zero-rename-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.extraJavaOptions", JAVA_OPTIONS)
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "500")
        .config("spark.speculation", "true")
        .config("spark.speculation.interval", "100ms")
        .config("spark.speculation.quantile", "0.5")
        .config("spark.speculation.multiplier", "1.5")
        .config("spark.speculation.minTaskRuntime", "200ms")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()
    # py4j logs from its finalizers at interpreter exit, after pytest has
    # closed the streams it captured: quiet it once Spark is stopped.
    logging.getLogger("py4j").setLevel(logging.CRITICAL)


@pytest.fixture(scope="session")
def s3_backend(request: pytest.FixtureRequest) -> S3Server:
    """The S3 server a test runs on: ``request.param`` where the test is
    parametrised over backends (tests/core), SeaweedFS elsewhere. The servers
    are session fixtures of their own, so switching backend between tests
    neither stops nor restarts one."""
    name = str(getattr(request, "param", DEFAULT_BACKEND))
    server: S3Server = request.getfixturevalue(_SERVER_FIXTURES[name])
    return server


@pytest.fixture(autouse=True)
def _backend_environment(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Point the environment's credentials and endpoint at the test's backend
    for the test's duration, so that code using boto3's default chain (and a
    forked crash child) talks to that server with credentials it accepts."""
    if "s3_backend" not in request.fixturenames:
        return
    server: S3Server = request.getfixturevalue("s3_backend")
    for key, value in server.environment().items():
        monkeypatch.setenv(key, value)


@pytest.fixture(scope="session")
def store_config(s3_backend: S3Server) -> StoreConfig:
    return StoreConfig(endpoint_url=s3_backend.endpoint_url, max_pool_connections=64)


# Tests whose buckets other processes (Spark's, the JVM engines', Airflow's, Dagster's)
# write to, which may outlive the test: their buckets are never reused.
_FOREIGN_WRITERS = ("spark", "airflow", "dagster", "peers")


@pytest.fixture
def bucket(s3_backend: S3Server, request: pytest.FixtureRequest) -> Iterator[str]:
    """An empty bucket of the test's own (see tests/buckets.py)."""
    if any(request.node.get_closest_marker(m) for m in _FOREIGN_WRITERS):
        yield buckets.new_bucket(s3_backend)
        return
    name = buckets.take(s3_backend)
    yield name
    buckets.give_back(s3_backend, name)


@pytest.fixture
def dest(bucket: str) -> str:
    return f"s3://{bucket}/table"


@pytest.fixture
def committer(dest: str, store_config: StoreConfig) -> Committer:
    return Committer(dest, store_config)


@pytest.fixture
def proxy(s3_backend: S3Server) -> Iterator[S3Proxy]:
    """A fault-injecting proxy in front of the test's S3 server, for this test alone."""
    with proxy_for(s3_backend) as running:
        yield running


@pytest.fixture
def proxied(proxy: S3Proxy, dest: str) -> Committer:
    """A committer whose every request goes through ``proxy``."""
    return Committer(dest, StoreConfig(endpoint_url=proxy.endpoint_url, max_pool_connections=64))
