"""The JVM engine beside the suite: one process for the session (``tests/peers/peer.py``
under ``.venv-peers``), started when a test first needs it, pointed at the
session's SeaweedFS and at the embedded Iceberg catalog's SQLite file, which
both sides share. zero-rename writes on the suite's own Spark session, as its
users run it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.peers.engine import PEERS_PYTHON, JvmEngine
from zero_rename.embedded_s3 import EmbeddedS3


@pytest.fixture(scope="session")
def jvm(s3_server: EmbeddedS3, iceberg_home: str) -> Iterator[JvmEngine]:
    if not PEERS_PYTHON.exists():
        pytest.fail(
            f"{PEERS_PYTHON.parent.parent.name} is missing: make peers-venv builds it "
            "(make test-peers does so itself)"
        )
    engine = JvmEngine(s3_server.environment())
    try:
        yield engine
    finally:
        engine.stop()
