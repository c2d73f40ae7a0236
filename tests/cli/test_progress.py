"""Progress on long work: drawn on stderr for a terminal only, after a delay, and
never a change to what a command prints on stdout or exits with.

The commands run in-process with progress forced on (ZERO_RENAME_PROGRESS=1, as
for a terminal) and its delay at 0, so a few items stand for many thousands:
what is checked is where progress goes and that it leaves stdout alone.
"""

from __future__ import annotations

import io
import logging
import sys
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from tests import table_stub
from tests.cli.conftest import Cli, Ran, committed_job, committing_job, running_job, stray_upload
from zero_rename.cli import output, serve, uploads
from zero_rename.cli.main import logging_to_stderr
from zero_rename.cli.output import Output, draws_progress
from zero_rename.core.committer import Committer
from zero_rename.core.s3 import races

ESC = "\x1b"
# The display's last line cleared and the cursor shown again: nothing of it stays.
ERASED = "\x1b[2K\x1b[?25h"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


# -- the display -----------------------------------------------------------
@pytest.mark.parametrize(
    "tty,env,drawn",
    [
        (True, {}, True),
        (False, {}, False),  # a pipe or a file
        (True, {"TERM": "dumb"}, False),
        (True, {"NO_COLOR": "1"}, False),
        (True, {"ZERO_RENAME_PROGRESS": "0"}, False),
        (False, {"ZERO_RENAME_PROGRESS": "1"}, True),
        (True, {"NO_COLOR": "1", "ZERO_RENAME_PROGRESS": "always"}, True),
    ],
)
def test_progress_is_drawn_only_on_a_terminal_that_can_draw(
    tty: bool, env: dict[str, str], drawn: bool
) -> None:
    stream = _Terminal() if tty else io.StringIO()
    assert draws_progress(stream, env) is drawn


def test_quick_work_draws_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    err = _Terminal()
    out = Output(stdout=io.StringIO(), stderr=err, progress=True)
    with out.progress("aborting uploads", 10_000, "uploads") as advance:
        advance(10_000)  # over long before the display's delay
    with out.steps("probing") as step:
        step("conditional writes")
    assert err.getvalue() == ""


def test_long_work_draws_a_bar_with_count_rate_and_time_left(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(output, "PROGRESS_DELAY", 0.05)
    err = _Terminal()
    out = Output(stdout=io.StringIO(), stderr=err, progress=True)
    with out.progress("aborting uploads", 40, "uploads") as advance:
        for _ in range(40):
            time.sleep(0.005)
            advance(1)
    drawn = err.getvalue()
    assert "aborting uploads" in drawn and "40/40 uploads" in drawn
    assert "━" in drawn and "/s" in drawn  # the bar and the rate
    assert drawn.rstrip("\r").endswith(ERASED)


def test_unknown_totals_count_and_steps_replace_each_other(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(output, "PROGRESS_DELAY", 0)
    monkeypatch.setenv("COLUMNS", "200")
    err = _Terminal()
    out = Output(stdout=io.StringIO(), stderr=err, progress=True)
    with out.progress("listing pending uploads", unit="uploads") as advance:
        advance(1234)
    with out.steps("rolling back job j") as step:
        step("checking the planned files", 3, "files")(3)
        step("deleting planned files", None, "files")(2)
        late = step("removing temporary objects")
    late(1)  # a count after its step ended is dropped
    drawn = err.getvalue()
    assert "listing pending uploads" in drawn and "1,234 uploads" in drawn
    for line in ("checking the planned files", "3/3 files", "deleting planned files"):
        assert line in drawn
    assert "rolling back job j: removing temporary objects" in drawn


def test_a_log_line_goes_above_the_display(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(output, "PROGRESS_DELAY", 0)
    err = _Terminal()
    monkeypatch.setattr(sys, "stderr", err)  # where the command's log lines go
    out = Output(stdout=io.StringIO(), stderr=err, progress=True)
    with logging_to_stderr(1), out.progress("aborting uploads", 2, "uploads") as advance:
        advance(1)
        logging.getLogger("zero_rename.cli").info("one of two aborted")
        advance(1)
    drawn = err.getvalue()
    # The display's line cleared, the log line whole, then the display again.
    assert "\x1b[2KINFO zero_rename.cli: one of two aborted\n" in drawn
    assert "2/2 uploads" in drawn.split("one of two aborted")[1]
    assert sys.stderr is err  # given back when the display ended


@pytest.mark.parametrize("json_mode,stderr", [(True, _Terminal), (False, io.StringIO)])
def test_nothing_is_drawn_in_json_mode_or_on_a_pipe(
    monkeypatch: pytest.MonkeyPatch, json_mode: bool, stderr: type[io.StringIO]
) -> None:
    monkeypatch.setattr(output, "PROGRESS_DELAY", 0)
    monkeypatch.delenv(output.PROGRESS_ENV, raising=False)
    err = stderr()
    out = Output(json_mode=json_mode, stdout=io.StringIO(), stderr=err)
    with out.progress("aborting uploads", 10, "uploads") as advance:
        advance(10)
    assert err.getvalue() == ""


# -- the commands ----------------------------------------------------------
@pytest.fixture
def drawn(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``drawn(*argv)``: the command run with progress forced on, no delay."""
    monkeypatch.setattr(output, "PROGRESS_DELAY", 0)
    monkeypatch.setattr(output, "PROGRESS_TABLE_ROWS", 1)  # every table laid out under one
    monkeypatch.setenv("COLUMNS", "200")  # descriptions whole, as on a wide terminal

    def run(*argv: str) -> Ran:
        monkeypatch.setenv(output.PROGRESS_ENV, "1")
        try:
            return cli(*argv)
        finally:
            monkeypatch.setenv(output.PROGRESS_ENV, "0")

    monkeypatch.setenv(output.PROGRESS_ENV, "0")
    return run


class _Frozen(datetime):
    """``uploads list`` prints ages: the same clock for both runs."""

    NOW = datetime(2024, 1, 1, tzinfo=UTC)

    @classmethod
    def now(cls, tz: Any = None) -> datetime:  # type: ignore[override]
        return cls.NOW


@pytest.mark.s3
def test_reading_commands_print_the_same_with_progress_as_without(
    cli: Cli,
    drawn: Any,
    committer: Committer,
    dest: str,
    bucket: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(uploads, "datetime", _Frozen)
    calls = table_stub.install(monkeypatch)
    done = committed_job(committer)
    stray_upload(committer, done)
    running_job(committer)
    monkeypatch.setattr(_Frozen, "NOW", datetime.now(UTC))
    commands = {
        ("uploads", "list", dest): ["listing pending uploads", "2 uploads"],
        ("uploads", "abort", dest, "--all-older-than", "0s", "--dry-run"): [
            "listing pending uploads"
        ],
        ("jobs", "list", dest): ["reading job records", "2 jobs", "laying out 2 rows"],
        ("jobs", "show", dest, done.job_id): [
            f"job {done.job_id[:8]}: reading its record",
            "listing its pending uploads",
            "counting its task manifests",
        ],
        ("success", "show", dest, "--files"): ["reading the file list", "3/3 files"],
        ("validate", dest): ["listing the destination's files", "3 files"],
        ("lifecycle", "show", bucket): [f"lifecycle of bucket {bucket}: reading its rules"],
        ("table", "expire", dest, "--older-than", "1d", "--format", "delta"): [
            "table expire: expiring the delta table's old versions"
        ],
    }
    for argv, shown in commands.items():
        plain, with_progress = cli(*argv), drawn(*argv)
        assert (with_progress.code, with_progress.out) == (plain.code, plain.out), argv
        assert plain.err == "" and ESC not in plain.out, argv
        for text in shown:
            assert text in with_progress.err, (argv, text, with_progress.err)
        assert with_progress.err.rstrip("\r").endswith(ERASED), argv
        as_json = drawn(*argv, "--json")
        assert as_json.err == "" and as_json.json() is not None, argv
    assert len(calls.expired) == 3


def _plain_result(ran: Ran, starts: str) -> None:
    assert ran.code == 0, ran.err
    assert ran.out.startswith(starts) and ESC not in ran.out, ran.out


@pytest.mark.s3
def test_changing_commands_draw_their_steps_on_stderr_only(
    drawn: Any, committer: Committer, dest: str, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    done = committed_job(committer)
    stray_upload(committer, done, "00008")
    stray_upload(committer, done, "00009")
    ran = drawn("uploads", "abort", dest, "--job", done.job_id)
    _plain_result(ran, "aborted 2 pending upload(s)")
    assert "listing pending uploads" in ran.err
    assert f"aborting uploads of job {done.job_id[:8]}" in ran.err and "2/2 uploads" in ran.err

    stray_upload(committer, done)
    abandoned = running_job(committer)
    ran = drawn("uploads", "abort", dest, "--all-older-than", "0s")
    assert ran.code == 0, ran.err
    assert "aborting old uploads" in ran.err and "aborting abandoned jobs" in ran.err
    assert ESC not in ran.out and committer.job(abandoned.job_id).state == "aborted"

    running = running_job(committer)
    ran = drawn("jobs", "abort", dest, running.job_id)
    _plain_result(ran, f"aborted job {running.job_id}")
    assert f"aborting job {running.job_id[:8]}: aborting pending uploads" in ran.err
    assert "1 uploads" in ran.err and "removing temporary objects" in ran.err

    stuck = committing_job(committer)
    ran = drawn("jobs", "commit", dest, stuck.job_id)
    _plain_result(ran, f"job {stuck.job_id} committed: 2 file(s)")
    assert f"committing job {stuck.job_id[:8]}: completing uploads" in ran.err
    assert "2/2 files" in ran.err

    stuck = committing_job(committer)
    ran = drawn("jobs", "rollback", dest, stuck.job_id, "--force")
    _plain_result(ran, f"rolled back job {stuck.job_id}")
    for step in ("checking the planned files", "2/2 files", "aborting pending uploads"):
        assert step in ran.err
    assert "deleting planned files" in ran.err

    ran = drawn("lifecycle", "set", bucket, "--days", "1")
    _plain_result(ran, "added rule")
    assert "writing its rules" in ran.err and "reading them back" in ran.err

    # A round of real races takes SeaweedFS seconds: each writer here just wins alone.
    monkeypatch.setattr(races, "race", lambda writers: 1)
    ran = drawn("doctor", dest, "--race-rounds", "1")
    _plain_result(ran, "probing the S3 store")
    for step in ("probing: conditional writes", "probing: racing 16 conditional creates"):
        assert step in ran.err
    assert "1/1 rounds" in ran.err and "probing: removing what the probes wrote" in ran.err


class _Server:
    """``s3 serve``'s server, started in no time: only its start's progress is looked at."""

    endpoint_url, pid, data_dir, buckets = "http://127.0.0.1:1", 1, "/tmp/x", ()

    def __init__(self, **_: Any) -> None:
        pass

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def environment(self) -> dict[str, str]:
        return {"AWS_ENDPOINT_URL": self.endpoint_url}


def test_serve_shows_the_server_starting(drawn: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(serve, "EmbeddedS3", _Server)
    monkeypatch.setattr(serve, "serve_until", lambda stop, url: None)
    ran = drawn("s3", "serve")
    assert ran.code == 0 and "starting the S3 server (SeaweedFS)" in ran.err
    assert ran.out.startswith("S3 server (SeaweedFS) listening on") and ESC not in ran.out
    as_json = drawn("s3", "serve", "--json")
    assert as_json.err == "" and as_json.json()["endpoint_url"] == _Server.endpoint_url
