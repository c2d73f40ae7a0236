"""The Commits page's scope and error text, without a server: fast checks of the rules."""

from __future__ import annotations

import random
import re
import time

import pytest

from zero_rename.airflow.ui.scope import Scope
from zero_rename.airflow.ui.view import HIDDEN, hide_urls, shown_error
from zero_rename.core.data.layout import Destination
from zero_rename.errors import DestinationError, StoreError


def allowed(scope: Scope, url: str) -> bool:
    return scope.allows(Destination.parse(url))


def test_the_scope_is_the_configured_destinations_and_whole_path_elements_under_a_prefix(
    caplog: pytest.LogCaptureFixture,
) -> None:
    scope = Scope.from_settings(
        "s3://lake/daily_events/, not-a-url",
        "s3://warehouse, s3a://lake/tables/, s3://lake/x@y, s3://",
    )
    assert scope.destinations == ("s3://lake/daily_events/", "not-a-url")
    assert allowed(scope, "s3a://lake/daily_events")  # as configured, however spelt
    assert allowed(scope, "s3://warehouse/any/table")  # a whole bucket
    assert allowed(scope, "s3://lake/tables/sales") and allowed(scope, "s3://lake/tables")
    assert not allowed(scope, "s3://lake/tables_private/t")  # not a path element of it
    assert not allowed(scope, "s3://lake/daily_events/dt=2024-01-01")  # a listed table only
    assert not allowed(scope, "s3://warehouse2/t") and not allowed(scope, "s3://other/tables/t")
    # Malformed prefixes are skipped, and said so in the log without a credential.
    assert len(scope.prefixes) == 2
    assert "allowed_destination_prefixes" in caplog.text and "x@y" not in caplog.text
    assert not allowed(Scope.from_settings("", ""), "s3://lake/daily_events")


def test_errors_on_the_page_hide_the_endpoint() -> None:
    endpoint = "http://10.1.2.3:8333"
    unreachable = StoreError(
        "ListObjectsV2 s3://b/t/: cannot reach the S3 endpoint (Could not connect to the "
        'endpoint URL: "http://10.1.2.3:8333/b?list-type=2&prefix=t%2F")'
    )
    shown = shown_error(unreachable, endpoint)
    assert shown.startswith("StoreError: ListObjectsV2 s3://b/t/: cannot reach the S3 endpoint")
    assert "10.1.2.3" not in shown and "8333" not in shown
    # The store's own words may name its host: hidden too.
    refused = DestinationError("access refused (AccessDenied at s3.example.com:9000 for b)")
    assert "example.com" not in shown_error(refused, "https://s3.example.com:9000")
    # Not zero-rename's own error: named by its type, the message left to the log.
    assert shown_error(ValueError(f"Invalid endpoint: {endpoint}"), None) == (
        "ValueError (details in the api-server's log)"
    )


# The pattern the page hid URLs with before: the reference for what is hidden,
# kept here only. Tried at every character, it rescans a word of scheme
# characters ("a.b.c...") from each of them: quadratic, so short texts alone.
_EARLIER = re.compile(r"\b(?!s3a?://)[A-Za-z][A-Za-z0-9+.\-]*://[^\s\"'<>)]*")


def test_urls_are_hidden_as_before_in_linear_time() -> None:
    rng = random.Random(3)
    alphabet = [*'ab:/ .+-_é)"3sS\n', "://", "s3://", "s3a://", "http://", "a3://"]
    for _ in range(20_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 20)))
        assert hide_urls(text) == _EARLIER.sub(HIDDEN, text), repr(text)
    started = time.monotonic()
    for text in ("a." * 500_000, "a.b://" * 170_000, "x" * 1_000_000 + "://h", "é://" * 250_000):
        hide_urls(text)
        shown_error(StoreError(text), "http://10.1.2.3:8333")
    assert time.monotonic() - started < 10.0
