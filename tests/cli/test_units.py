"""The CLI's pure parts: durations, rule merging, exit codes, output, parser."""

from __future__ import annotations

import io
import json
import logging
import os
import signal
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from tests.helpers import CREDENTIAL_URLS, KEY, SECRET, leaks
from zero_rename.cli import lifecycle, serve
from zero_rename.cli.context import Context
from zero_rename.cli.durations import format_duration, format_span, parse_duration
from zero_rename.cli.exits import ExitCode, NotFound, Refused, exit_code_for
from zero_rename.cli.main import SafeFormatter, build_parser, main
from zero_rename.cli.output import Output, stderr_safe
from zero_rename.core.s3.profiles import named_profile
from zero_rename.errors import (
    AbortRefusedError,
    ConfigError,
    CredentialsError,
    DestinationError,
    JobNotFoundError,
    StoreError,
    ValidationError,
)

JOB = "5f0c9a4e-2b1d-4c8e-9f3a-1d2e3f4a5b6c"


# -- durations -------------------------------------------------------------
@pytest.mark.parametrize(
    "text, seconds",
    [
        ("24h", 86400),
        ("90m", 5400),
        ("7d", 604800),
        ("1d12h", 129600),
        ("30s", 30),
        ("0s", 0),
        ("2w", 1209600),
        ("24H", 86400),
    ],
)
def test_durations_parse(text: str, seconds: int) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["24", "h", "24x", "-1h", "1.5h", "24 h", "", "1h-", "d7"])
def test_bad_durations_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(text)


def test_durations_format() -> None:
    assert [format_span(s) for s in (0, 5400, 86400, 129600, None)] == [
        "0s",
        "1h30m",
        "1d",
        "1d12h",
        "-",
    ]
    assert [format_duration(s) for s in (0.125, 42, 3700, None)] == ["0.12s", "42.0s", "1h 1m", "-"]


# -- lifecycle rules -------------------------------------------------------
EXPIRE = {
    "ID": "logs",
    "Status": "Enabled",
    "Filter": {"Prefix": "logs/"},
    "Expiration": {"Days": 30},
}
TRANSITION = {
    "ID": "cold",
    "Status": "Disabled",
    "Filter": {"Prefix": "archive/"},
    "Transitions": [{"Days": 90, "StorageClass": "GLACIER"}],
}


def test_rule_is_added_after_existing_rules_which_stay_as_they_were() -> None:
    ours = lifecycle.abort_rule(1, "t/")
    merged, change = lifecycle.merge_rule([EXPIRE, TRANSITION], ours)
    assert change == "added"
    assert merged == [EXPIRE, TRANSITION, ours]


def test_rule_is_updated_in_place_and_unchanged_when_equal() -> None:
    merged, _ = lifecycle.merge_rule(
        [EXPIRE, lifecycle.abort_rule(1), TRANSITION], lifecycle.abort_rule(3, "t/")
    )
    assert [r["ID"] for r in merged] == ["logs", lifecycle.RULE_ID, "cold"]
    assert merged[1]["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 3}
    assert merged[1]["Filter"] == {"Prefix": "t/"}
    again, change = lifecycle.merge_rule(merged, lifecycle.abort_rule(3, "t/"))
    assert change == "unchanged" and again == merged


def test_merge_does_not_change_its_input() -> None:
    rules = [EXPIRE, lifecycle.abort_rule(1)]
    snapshot = json.dumps(rules)
    lifecycle.merge_rule(rules, lifecycle.abort_rule(5))
    assert json.dumps(rules) == snapshot


def test_merge_respects_the_rule_limit() -> None:
    full = [{**EXPIRE, "ID": f"r{i}"} for i in range(lifecycle.MAX_RULES)]
    with pytest.raises(ConfigError, match="1000"):
        lifecycle.merge_rule(full, lifecycle.abort_rule(1))
    _, change = lifecycle.merge_rule([*full[:-1], lifecycle.abort_rule(2)], lifecycle.abort_rule(1))
    assert change == "updated"


def test_prefixes_end_in_a_slash_so_siblings_never_match() -> None:
    assert lifecycle.normalize_prefix("out/ds1") == "out/ds1/"
    assert lifecycle.normalize_prefix("/out/ds1/") == "out/ds1/"
    assert lifecycle.normalize_prefix("") == ""
    with pytest.raises(ConfigError):
        lifecycle.normalize_prefix("s3://b/out")


def test_overlapping_abort_rules_are_found() -> None:
    everything = {
        "ID": "all",
        "Status": "Enabled",
        "Filter": {"Prefix": ""},
        "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 7},
    }
    elsewhere = {**everything, "ID": "other", "Filter": {"Prefix": "logs/"}}
    legacy = {
        "ID": "old",
        "Status": "Enabled",
        "Prefix": "t/sub/",
        "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 2},
    }
    ours = lifecycle.abort_rule(1, "t/")
    found = lifecycle.overlapping_abort_rules([everything, elsewhere, legacy, EXPIRE, ours], ours)
    assert [r["ID"] for r in found] == ["all", "old"]


def test_bucket_names() -> None:
    assert lifecycle.bucket_name("s3://my-bucket/") == "my-bucket"
    for bad in ("s3://b/path", "Bad_Bucket", "ab"):
        with pytest.raises(ConfigError):
            lifecycle.bucket_name(bad)


# -- exit codes ------------------------------------------------------------
def _missing_bucket() -> DestinationError:
    try:
        raise DestinationError("bucket does not exist") from ClientError(
            {"Error": {"Code": "NoSuchBucket"}}, "ListObjectsV2"
        )
    except DestinationError as exc:
        return exc


@pytest.mark.parametrize(
    "error, code",
    [
        (Refused("x"), ExitCode.REFUSED),
        (AbortRefusedError("x"), ExitCode.REFUSED),
        (NotFound("x"), ExitCode.NOT_FOUND),
        (JobNotFoundError("x"), ExitCode.NOT_FOUND),
        (_missing_bucket(), ExitCode.NOT_FOUND),
        (DestinationError("access refused"), ExitCode.STORE),
        (CredentialsError("no usable S3 credentials"), ExitCode.USAGE),
        (ConfigError("x"), ExitCode.USAGE),
        (StoreError("x"), ExitCode.STORE),
        (ValidationError("x", []), ExitCode.FAILED),
    ],
)
def test_errors_map_to_exit_codes(error: Exception, code: ExitCode) -> None:
    assert exit_code_for(error) == code


# -- output ----------------------------------------------------------------
def test_text_from_s3_is_not_read_as_markup() -> None:
    stdout = io.StringIO()
    out = Output(stdout=stdout, stderr=io.StringIO())
    out.table(["key"], [["dt=[bold]x[/bold]/part-[red]"]])
    out.fields([("partition", "[x]")])
    assert "dt=[bold]x[/bold]/part-[red]" in stdout.getvalue()
    assert "[x]" in stdout.getvalue()


def test_json_mode_prints_one_document_and_nothing_else() -> None:
    stdout = io.StringIO()
    out = Output(json_mode=True, stdout=stdout, stderr=io.StringIO())
    out.say("hello")
    out.table(["a"], [[1]])
    out.emit_json({"when": datetime(2024, 1, 1, tzinfo=UTC), "n": 1})
    assert json.loads(stdout.getvalue()) == {"when": "2024-01-01T00:00:00Z", "n": 1}


# -- s3 serve --------------------------------------------------------------
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_and_sigterm_ask_the_server_to_stop(sig: signal.Signals) -> None:
    before = signal.getsignal(sig)
    with serve.stop_signals() as stop:
        os.kill(os.getpid(), sig)
        assert stop.wait(5)
    assert signal.getsignal(sig) is before


# -- parser ----------------------------------------------------------------
def test_global_options_go_before_or_after_the_command() -> None:
    parser = build_parser()
    before = parser.parse_args(["--json", "--endpoint-url", "http://x", "jobs", "list", "s3://b/t"])
    after = parser.parse_args(["jobs", "list", "s3://b/t", "--json", "--endpoint-url", "http://x"])
    for args in (before, after):
        assert args.json is True and args.endpoint_url == "http://x"
    assert parser.parse_args(["jobs", "list", "s3://b/t"]).json is False


def test_help_lists_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    text = capsys.readouterr().out
    for line in (
        "0    done",
        "1    problems found",
        "2    usage error",
        "3    refused",
        "4    not found",
        "5    S3 failed",
        "130  interrupted",
    ):
        assert line in text
    assert main(["uploads", "abort", "--help"]) == 0
    text = capsys.readouterr().out
    assert "3    refused" in text and "--all-older-than" in text


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["uploads"],
        ["uploads", "abort", "s3://b/t"],
        ["uploads", "abort", "s3://b/t", "--job", JOB, "--all-older-than", "1h"],
        ["uploads", "list", "s3://b/t", "--older-than", "24x"],
        ["uploads", "list", "s3://b/t", "--job", "not-a-uuid"],
        ["lifecycle", "set", "b-ucket", "--days", "0"],
        ["nonsense"],
    ],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert err.startswith("error: zero-rename") and err.rstrip().endswith("--help)")
    assert len(err.splitlines()) == 1


def test_running_a_command_leaves_the_callers_logging_alone() -> None:
    logger = logging.getLogger("zero_rename")
    before = (list(logger.handlers), logger.level, logger.propagate)
    assert main(["-vv", "jobs", "list", "http://not-s3/x"]) == ExitCode.USAGE
    assert (list(logger.handlers), logger.level, logger.propagate) == before


def test_bad_destination_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["jobs", "list", "http://not-s3/x"]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert err.startswith("error: destination") and "Traceback" not in err


# Hostile input, each refused before any request: stderr is one line, exit 2.
# "{file}" stands for a regular file.
HOSTILE = [
    ["--endpoint-url", "notaurl", "jobs", "list", "s3://b/t"],
    ["--endpoint-url", "", "jobs", "list", "s3://b/t"],
    ["jobs", "list", "s3://b/t", "--endpoint-url", "ftp://127.0.0.1:21"],
    ["jobs", "list", "s3://b/t", "--endpoint-url", "http://127.0.0.1:99999"],
    ["jobs", "list", "s3://b/t", "--endpoint-url", "http://[::1"],
    ["jobs", "list", "s3://b/t", "--endpoint-url", "http://127.0.0.1:9000/\udcff"],
    ["--region", "bad region!", "jobs", "list", "s3://b/t"],
    ["--region", "", "jobs", "list", "s3://b/t"],
    ["--store-profile", "", "jobs", "list", "s3://b/t"],
    ["jobs", "list", "notaurl"],
    ["jobs", "list", ""],
    ["jobs", "list", "s3://B_ad/t"],
    ["jobs", "list", "s3://"],
    ["jobs", "list", "s3://b/t\x00"],
    ["jobs", "list", "s3://b/t\udcff"],  # a non-UTF-8 argv byte, as Python decodes it
    ["jobs", "list", "s3://b/t", "more\x1b]8;;http://x\x1b\\"],
    ["uploads", "list", "s3://b/t/../x"],
    ["jobs", "show", "s3://b/t", "not-a-uuid"],
    ["jobs", "show", "s3://b/t", ""],
    ["jobs", "show", "s3://b/t", "\x1b[31m" + JOB],
    ["uploads", "abort", "s3://b/t", "--all-older-than", "5q", "--dry-run"],
    ["uploads", "abort", "s3://b/t", "--all-older-than", "99999999999999d"],
    ["uploads", "list", "s3://b/t", "--older-than", "9" * 5000 + "s"],
    ["uploads", "abort", "s3://b/t", "--job", JOB, "--threads", "99999999999"],
    ["validate", "s3://b/t", "--threads", "9" * 5000],
    ["lifecycle", "set", "bkt", "--days", "99999999999999999999"],
    ["lifecycle", "set", "bkt", "--days", str(2**31)],
    ["lifecycle", "set", "bkt", "--days", "1", "--rule-id", ""],
    ["lifecycle", "set", "bkt", "--days", "1", "--rule-id", "r" * 256],
    ["lifecycle", "set", "bkt", "--days", "1", "--prefix", "p\x00"],
    ["lifecycle", "show", "Not_A_Bucket"],
    ["s3", "serve", "--dir", "{file}/sub"],
    ["s3", "serve", "--dir", ""],
    ["s3", "serve", "--bucket", "A_b"],
]


@pytest.mark.parametrize("argv", HOSTILE, ids=[" ".join(a)[:60] for a in HOSTILE])
def test_hostile_input_is_one_line_and_exit_2(
    argv: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Refused before any request (no server here: one would be exit 5), with
    the library's own error, never a traceback, nothing a terminal acts on."""
    (tmp_path / "file").write_text("x")
    assert main([a.replace("{file}", str(tmp_path / "file")) for a in argv]) == ExitCode.USAGE
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.splitlines()) == 1 and captured.err.startswith("error: ")
    assert "Traceback" not in captured.err and "unexpected" not in captured.err
    assert not any(c in captured.err for c in "\x00\x1b\udcff")


S3_SHAPES = [f"s3://{KEY}:{SECRET}@bkt/t", f"s3://{KEY}:{SECRET[:4]}/{SECRET[4:]}@bkt/t"]
SHAPES = CREDENTIAL_URLS
# Where a URL comes from: an option, the environment, a command's argument.
SOURCES = {
    "--endpoint-url": lambda url: (["--endpoint-url", url, "jobs", "list", "s3://bkt/t"], {}),
    "$AWS_ENDPOINT_URL": lambda url: (["jobs", "list", "s3://bkt/t"], {"AWS_ENDPOINT_URL": url}),
    "$AWS_ENDPOINT_URL_S3": lambda url: (
        ["doctor", "s3://bkt/t"],
        {"AWS_ENDPOINT_URL_S3": url},
    ),
}
S3_SOURCES = {
    "DEST": lambda url: (["uploads", "list", url], {}),
    "lifecycle set": lambda url: (["lifecycle", "set", url.rsplit("/", 1)[0], "--days", "1"], {}),
    "lifecycle show": lambda url: (["lifecycle", "show", url.rsplit("/", 1)[0]], {}),
    "--prefix": lambda url: (["lifecycle", "set", "bkt", "--days", "1", "--prefix", url], {}),
}
WALK = [(s, u) for s in SOURCES for u in SHAPES] + [(s, u) for s in S3_SOURCES for u in S3_SHAPES]


@pytest.mark.parametrize("source, url", WALK, ids=[f"{s} {u[:24]}" for s, u in WALK])
def test_no_credential_is_echoed_whatever_the_url_or_its_source(
    source: str,
    url: str,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    argv, env = {**SOURCES, **S3_SOURCES}[source](url)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    caplog.set_level(logging.DEBUG)
    assert main(["-vv", *argv]) == ExitCode.USAGE
    captured = capsys.readouterr()
    text = captured.out + captured.err + caplog.text
    assert "***@" in captured.err
    assert not leaks(text)


def test_a_credential_in_an_unexpected_error_is_masked(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last resort for an error no layer named: one line, the URL masked."""

    def broken(ctx: object, args: object) -> None:
        raise RuntimeError(f"Could not connect to 'http://{KEY}:{SECRET}@10.0.0.1/x'")

    monkeypatch.setattr(lifecycle, "run_show", broken)
    assert main(["lifecycle", "show", "bkt"]) == ExitCode.FAILED
    err = capsys.readouterr().err
    assert err.startswith("error: unexpected RuntimeError") and len(err.splitlines()) == 1
    assert not leaks(err) and "http://***@10.0.0.1/x" in err


# -- a megabyte of input ----------------------------------------------------
# What a 1 MB text may take through a path that masks it: thousands of times what
# it takes, and nothing like the minutes a pattern rescanning words from each
# character took for a tenth of it.
MEGABYTE_SECONDS = 10.0


@pytest.mark.parametrize(
    "dest",
    [
        "s3://bkt/" + "a" * 1_000_000,
        f"s3://{KEY}:{SECRET}" + "/x" * 500_000 + "@bkt/t",
        "s3://" + "a:" * 500_000,
    ],
    ids=["word", "credential", "colons"],
)
@pytest.mark.parametrize("command", [["jobs", "list"], ["uploads", "list"], ["validate"]])
def test_a_megabyte_destination_is_one_line_at_once(
    command: list[str], dest: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Refused as a usage error before anything else is done with it (no server
    here: asking one would be exit 5), its first characters shown, masked."""
    started = time.monotonic()
    assert main([*command, dest]) == ExitCode.USAGE
    assert time.monotonic() - started < MEGABYTE_SECONDS
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "longer than any S3 URL" in err
    assert len(err) < 500 and not leaks(err)


def test_log_and_error_lines_of_a_megabyte_are_masked_at_once() -> None:
    text = (
        f"Could not connect to http://{KEY}:{SECRET}" + "/x" * 500_000 + "@host " + "a:" * 250_000
    )
    started = time.monotonic()
    record = logging.LogRecord("zero_rename.x", logging.WARNING, __file__, 1, text, None, None)
    logged = SafeFormatter("%(message)s").format(record)
    shown = stderr_safe(text)
    assert time.monotonic() - started < MEGABYTE_SECONDS
    assert not leaks(logged) and not leaks(shown) and "http://***@host" in shown


def test_store_profile_holds_for_the_commands_store() -> None:
    args = build_parser().parse_args(
        [
            "--endpoint-url",
            "http://127.0.0.1:9",
            "jobs",
            "list",
            "s3://bkt/t",
            "--store-profile",
            "ceph",
        ]
    )
    ctx = Context.from_args(args, Output())
    assert ctx.store().profile == named_profile("ceph")


def test_tables_show_each_job_by_its_shortest_unambiguous_prefix() -> None:
    from zero_rename.cli.output import short_ids

    ids = [
        "abcdef01-0000-4000-8000-000000000001",
        "abcdef01-0000-4000-8000-000000000002",
        "abcdef02-1111-4000-8000-000000000003",
        "99c0ffba-2ddc-4830-a0f0-50e5f6de5df0",
    ]
    assert short_ids(ids) == {
        ids[0]: ids[0],
        ids[1]: ids[1],
        ids[2]: "abcdef02",
        ids[3]: "99c0ffba",
    }
    assert short_ids(ids[2:3]) == {ids[2]: "abcdef02"} and short_ids([]) == {}
    assert short_ids(["abcdef01-0000-4000", "abcdef01-1000-4000"]) == {
        "abcdef01-0000-4000": "abcdef01-0",
        "abcdef01-1000-4000": "abcdef01-1",
    }
