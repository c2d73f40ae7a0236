"""Job commit's completes: on the light request path by default, through the
store's own client where its credentials are not the standard chain's, and the
same outcome (every file once, nothing pending) whichever path sent them."""

from __future__ import annotations

import dataclasses
import json
import threading
from collections import Counter
from typing import Any

import pytest

from tests.faults import inject
from tests.helpers import visible
from zero_rename.core.committer import Committer
from zero_rename.core.data.layout import Destination
from zero_rename.core.data.records import JobContext
from zero_rename.core.protocol import publish
from zero_rename.core.s3.client import S3Store, StoreConfig, make_client
from zero_rename.core.s3.completers import OPERATION, add_request_hook, remove_request_hook
from zero_rename.errors import ConfigError

pytestmark = pytest.mark.s3

FILES = 12


class Sent:
    """Completes seen by botocore's events and by the light path's hook, apart."""

    def __init__(self, client: Any) -> None:
        self.botocore: Counter[str] = Counter()
        self.light = 0
        self._lock = threading.Lock()
        client.meta.events.register("before-send.s3.CompleteMultipartUpload", self._botocore)
        add_request_hook(client, self._light)

    def _botocore(self, event_name: str, **_: Any) -> None:
        with self._lock:
            self.botocore[event_name] += 1

    def _light(self, stage: str, key: str, context: dict[str, Any]) -> None:
        if stage == "send":
            with self._lock:
                self.light += 1


def _write(c: Committer) -> str:
    job = c.setup_job({"committer": "magic"})
    attempt = c.task_attempt(job, "00000")
    for n in range(FILES):
        with attempt.open() as out:
            out.write(f"file {n}".encode())
    attempt.commit()
    return job.job_id


def _committed_once(c: Committer, job_id: str) -> None:
    files = visible(c)
    assert len(files) == FILES
    assert sorted(files.values()) == sorted(f"file {n}".encode() for n in range(FILES))
    assert c.pending_uploads(job_id) == []


def test_default_is_the_light_path(committer: Committer) -> None:
    job_id = _write(committer)
    sent = Sent(committer.store.client)
    committer.commit_job(job_id)
    assert sent.light == FILES and not sent.botocore
    _committed_once(committer, job_id)
    # The light path's requests are in the job's statistics.
    found = committer.store.get_object(committer.dest.bucket, committer.dest.dir + "_SUCCESS")
    assert found is not None
    success = json.loads(found[0])
    assert success["iostatistics"]["counters"]["s3.CompleteMultipartUpload"] == FILES


def test_botocore_path_when_asked(dest: str, store_config: StoreConfig) -> None:
    c = Committer(dest, dataclasses.replace(store_config, request_path="botocore"))
    job_id = _write(c)
    sent = Sent(c.store.client)
    c.commit_job(job_id)
    assert sent.light == 0 and sum(sent.botocore.values()) == FILES
    _committed_once(c, job_id)


def test_a_client_made_elsewhere_keeps_every_request(dest: str, store_config: StoreConfig) -> None:
    """An Airflow connection's client carries credentials of its own: the commit
    never opens connections around it."""
    c = Committer(dest, store=S3Store(make_client(store_config)))
    assert c.store.config is None
    job_id = _write(c)
    sent = Sent(c.store.client)
    c.commit_job(job_id)
    assert sent.light == 0 and sum(sent.botocore.values()) == FILES
    _committed_once(c, job_id)


def test_lost_light_path_response_is_settled_by_the_object(committer: Committer) -> None:
    """The complete took effect, its answer was lost: the ETag says it is done."""
    job_id = _write(committer)
    lost = inject(committer.store.client, OPERATION, when="after", nth=3, times=2)
    committer.commit_job(job_id)
    assert lost.fired == 2
    _committed_once(committer, job_id)


def test_path_choice(store_config: StoreConfig, bucket: str) -> None:
    dest = Destination.parse(f"s3://{bucket}/t")
    assert publish._fanout(JobContext(S3Store(make_client(store_config)), dest), 10) is None
    assert publish._fanout(JobContext(S3Store.connect(store_config), dest), 10) == ("light", 1)
    assert publish._fanout(JobContext(S3Store.connect(store_config), dest), 0) is None
    botocore = dataclasses.replace(store_config, request_path="botocore")
    assert publish._fanout(JobContext(S3Store.connect(botocore), dest), 10) is None
    workers = dataclasses.replace(botocore, complete_processes=2)
    assert publish._fanout(JobContext(S3Store.connect(workers), dest), 10) == ("botocore", 2)


def test_hooks_go_with_their_client(store_config: StoreConfig) -> None:
    calls: list[str] = []
    client = make_client(store_config)
    hook = lambda stage, key, context: calls.append(stage)  # noqa: E731
    add_request_hook(client, hook)
    remove_request_hook(client, hook)
    remove_request_hook(client, hook)  # twice: no error
    from zero_rename.core.s3.completers import _hooks

    assert _hooks(client) == ()
    with pytest.raises(ConfigError):
        StoreConfig(request_path="fast")
    with pytest.raises(ConfigError):
        StoreConfig(complete_processes=-1)
