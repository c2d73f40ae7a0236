"""Which action the Commits page offers for which job, and which requests may act."""

from __future__ import annotations

import pytest
from starlette.requests import Request

from zero_rename.airflow.ui.actions import ABORT, FORCE_ROLL_BACK, ROLL_BACK, offered
from zero_rename.airflow.ui.airflow_side import same_origin

pytestmark = pytest.mark.unit


def test_an_action_fits_a_failed_stuck_or_committing_job_only() -> None:
    assert offered("setup", stuck=False, failed=False) == ()  # running as it should
    assert offered("setup", stuck=False, failed=True) == (ABORT,)
    assert offered("sealed", stuck=True, failed=False) == (ABORT,)
    assert offered("committing", stuck=False, failed=False) == (ROLL_BACK, FORCE_ROLL_BACK)
    assert offered("rolling_back", stuck=True, failed=False) == (ROLL_BACK,)
    for state in ("committed", "aborted"):
        assert offered(state, stuck=True, failed=True) == ()
    assert ABORT.params("s3://b/t", "j") == {
        "destination": "s3://b/t",
        "job_id": "j",
        "roll_back": False,
        "force": False,
    }


def request(headers: dict[str, str], host: str = "127.0.0.1:8080") -> Request:
    raw = [(k.lower().encode(), v.encode()) for k, v in {"host": host, **headers}.items()]
    scope = {"type": "http", "method": "POST", "scheme": "http", "path": "/", "headers": raw}
    return Request(scope)


def test_only_a_request_from_the_pages_own_origin_may_act() -> None:
    assert same_origin(request({"Sec-Fetch-Site": "same-origin"}))
    assert not same_origin(request({"Sec-Fetch-Site": "same-site"}))  # another port, say
    assert not same_origin(request({"Sec-Fetch-Site": "cross-site", "Origin": "http://x"}))
    assert same_origin(request({"Origin": "http://127.0.0.1:8080"}))
    assert not same_origin(request({"Origin": "http://127.0.0.1:9090"}))
    assert not same_origin(request({"Origin": "null"}))
    assert not same_origin(request({}))  # a cookie alone proves nothing
    assert same_origin(request({"Authorization": "Bearer abc"}))  # no browser sends one itself
