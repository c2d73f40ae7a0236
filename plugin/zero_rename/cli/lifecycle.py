"""``zero-rename lifecycle set|show``: a bucket rule that aborts abandoned uploads.

Pending uploads are billed until aborted. A job that dies before its abort
or cleanup runs leaves them behind; an ``AbortIncompleteMultipartUpload``
lifecycle rule makes S3 abort them N days after they started. S3 runs it
asynchronously, with a granularity of days, so it is a backstop, not a
cleanup step. The rule is merged into the bucket's existing rules under a
stable id: other rules are kept as they are and a second run updates ours.

S3 has no conditional write for lifecycle configurations: a change made by
someone else between our read and our write is lost. The rule is read back
after writing to make sure the server kept it.
"""

from __future__ import annotations

import argparse
import copy
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from zero_rename.cli.arguments import Subcommands, command, command_group, whole_number
from zero_rename.cli.context import Context
from zero_rename.cli.output import Output, Result
from zero_rename.core import MAX_KEY_BYTES, S3Store, check_bucket_name, check_key_text, shown_url
from zero_rename.errors import ConfigError, StoreError

log = logging.getLogger(__name__)

RULE_ID = "zero-rename-abort-incomplete-uploads"
# S3: a lifecycle configuration holds at most 1,000 rules; DaysAfterInitiation is
# a positive 32-bit integer; a rule id at most 255 characters.
MAX_RULES = 1000
MAX_DAYS = 2**31 - 1
MAX_RULE_ID = 255
# Settings of the whole configuration, returned beside the rules.
_CONFIG_SETTINGS = ("TransitionDefaultMinimumObjectSize",)
_UNSUPPORTED = {"NotImplemented", "MethodNotAllowed", "MalformedXML", "501", "405"}

Rule = dict[str, Any]


def register(groups: Subcommands, common: argparse.ArgumentParser) -> None:
    commands = command_group(groups, "lifecycle", "bucket rule aborting abandoned uploads")
    set_ = command(
        commands,
        "set",
        common,
        run_set,
        help="add or update the rule",
        description="Add (or update in place) a lifecycle rule that aborts multipart "
        "uploads still pending DAYS days after they started. The bucket's other "
        "rules are kept.",
    )
    set_.add_argument("bucket", metavar="BUCKET", help="bucket name (or s3://bucket)")
    set_.add_argument(
        "--days",
        type=whole_number(MAX_DAYS),
        required=True,
        metavar="N",
        help="days after initiation (1 suits jobs shorter than a day)",
    )
    set_.add_argument(
        "--prefix",
        default="",
        metavar="P",
        help="only keys under this prefix; a trailing '/' is added",
    )
    set_.add_argument(
        "--rule-id", default=RULE_ID, metavar="ID", help=f"the rule's id (default {RULE_ID})"
    )

    show = command(
        commands,
        "show",
        common,
        run_show,
        help="the bucket's lifecycle rules",
        description="Show the bucket's lifecycle rules and which of them abort "
        "incomplete multipart uploads.",
    )
    show.add_argument("bucket", metavar="BUCKET", help="bucket name (or s3://bucket)")


# -- pure rule handling ----------------------------------------------------
def normalize_prefix(prefix: str) -> str:
    """A key prefix that ends in '/', so ``out/ds1`` never matches ``out/ds10``."""
    if "://" in prefix:
        raise ConfigError(
            f"--prefix {shown_url(prefix)!r} is a URL; give the key prefix inside the "
            "bucket, e.g. warehouse/events"
        )
    cleaned = check_key_text("--prefix", prefix.strip().lstrip("/"))
    if len(cleaned.encode("utf-8")) >= MAX_KEY_BYTES:
        raise ConfigError(f"--prefix {prefix[:80]!r}... is longer than any S3 key")
    return cleaned if not cleaned or cleaned.endswith("/") else cleaned + "/"


def check_rule_id(rule_id: str) -> str:
    """A rule id S3 takes: 1 to 255 characters, printable (it is shown in listings)."""
    if not 1 <= len(rule_id) <= MAX_RULE_ID or not rule_id.isprintable():
        raise ConfigError(
            f"--rule-id {rule_id[:80]!r} must be 1 to {MAX_RULE_ID} printable characters"
        )
    return check_key_text("--rule-id", rule_id)


def abort_rule(days: int, prefix: str = "", rule_id: str = RULE_ID) -> Rule:
    if not 1 <= days <= MAX_DAYS:
        raise ConfigError(f"days must be from 1 to {MAX_DAYS:,}, not {days}")
    check_rule_id(rule_id)
    return {
        "ID": rule_id,
        "Status": "Enabled",
        "Filter": {"Prefix": prefix},
        "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": days},
    }


def merge_rule(
    rules: Sequence[Mapping[str, Any]], rule: Mapping[str, Any]
) -> tuple[list[Rule], str]:
    """``rules`` with ``rule`` in place of the one with its id, or appended.

    Returns the new rule list and what happened: ``added``, ``updated`` or
    ``unchanged``. Other rules come back unchanged and in their order.

    Raises:
        ConfigError: adding would exceed S3's 1,000 rules.
    """
    merged = [copy.deepcopy(dict(r)) for r in rules]
    for i, existing in enumerate(merged):
        if existing.get("ID") == rule["ID"]:
            if existing == dict(rule):
                return merged, "unchanged"
            merged[i] = copy.deepcopy(dict(rule))
            return merged, "updated"
    if len(merged) >= MAX_RULES:
        raise ConfigError(f"the bucket already has {len(merged)} lifecycle rules, S3's limit")
    return [*merged, copy.deepcopy(dict(rule))], "added"


def rule_prefix(rule: Mapping[str, Any]) -> str | None:
    """The key prefix a rule applies to (None when it filters on more than a prefix)."""
    if "Prefix" in rule:  # the older form, without Filter
        return str(rule["Prefix"])
    found = rule.get("Filter", {})
    if set(found) <= {"Prefix"}:
        return str(found.get("Prefix", ""))
    return None


def abort_days(rule: Mapping[str, Any]) -> int | None:
    action = rule.get("AbortIncompleteMultipartUpload")
    return int(action["DaysAfterInitiation"]) if action else None


def overlapping_abort_rules(
    rules: Sequence[Mapping[str, Any]], ours: Mapping[str, Any]
) -> list[Mapping[str, Any]]:
    """Other enabled rules that also abort incomplete uploads under our prefix."""
    prefix = rule_prefix(ours) or ""
    found = []
    for rule in rules:
        other = rule_prefix(rule)
        if (
            rule.get("ID") != ours["ID"]
            and rule.get("Status") == "Enabled"
            and abort_days(rule) is not None
            and (other is None or other.startswith(prefix) or prefix.startswith(other))
        ):
            found.append(rule)
    return found


def describe(rule: Mapping[str, Any]) -> tuple[str, str]:
    """(what it applies to, what it does), for people."""
    prefix = rule_prefix(rule)
    scope = (
        "all keys"
        if prefix == ""
        else f"prefix {prefix}"
        if prefix is not None
        else f"filter {rule.get('Filter')}"
    )
    actions = []
    if abort_days(rule) is not None:
        actions.append(f"abort incomplete uploads after {abort_days(rule)} d")
    if "Expiration" in rule:
        exp = rule["Expiration"]
        actions.append(f"expire after {exp['Days']} d" if "Days" in exp else f"expire {exp}")
    actions += [
        name
        for name in ("Transitions", "NoncurrentVersionExpiration", "NoncurrentVersionTransitions")
        if name in rule
    ]
    return scope, "; ".join(actions) or "-"


# -- S3 --------------------------------------------------------------------
def bucket_name(text: str) -> str:
    name = text.removeprefix("s3://").removeprefix("s3a://").rstrip("/")
    if "/" in name:
        raise ConfigError(
            f"{shown_url(text)!r} names a path; lifecycle rules belong to a bucket: give "
            "the bucket and use --prefix for the path"
        )
    return check_bucket_name(name, "bucket")


def read_config(store: S3Store, bucket: str) -> tuple[list[Rule], dict[str, Any]]:
    """The bucket's rules, and the configuration's other settings to write back with them."""
    try:
        response = store.get_lifecycle(bucket)
    except StoreError as exc:
        raise _refusal(exc, bucket) from exc.__cause__
    if response is None:
        return [], {}
    # A PUT without it would reset the bucket's setting to the default.
    kept = {k: response[k] for k in _CONFIG_SETTINGS if k in response}
    return list(response.get("Rules", [])), kept


def read_rules(store: S3Store, bucket: str) -> list[Rule]:
    return read_config(store, bucket)[0]


def write_rules(
    store: S3Store, bucket: str, rules: list[Rule], settings: dict[str, Any] | None = None
) -> None:
    try:
        store.put_lifecycle(bucket, rules, settings or {})
    except StoreError as exc:
        raise _refusal(exc, bucket) from exc.__cause__


def _refusal(exc: StoreError, bucket: str) -> StoreError:
    """A server without lifecycle support says so in its own words; name the alternative."""
    if exc.code in _UNSUPPORTED or str(exc.status) in _UNSUPPORTED:
        return StoreError(
            f"the S3 server refused the lifecycle configuration of bucket {bucket} ({exc}); "
            "it may not support AbortIncompleteMultipartUpload rules. Sweep abandoned uploads "
            "on a schedule instead: zero-rename uploads abort DEST --all-older-than 24h",
            operation=exc.operation,
            code=exc.code,
        )
    return exc


# -- commands --------------------------------------------------------------
def run_set(ctx: Context, args: argparse.Namespace) -> Result:
    bucket = bucket_name(args.bucket)
    prefix = normalize_prefix(args.prefix)
    ours = abort_rule(args.days, prefix, args.rule_id)  # bad input: before any request
    # A few requests, but a slow or distant store (or one retrying) takes seconds.
    with ctx.out.steps(f"lifecycle of bucket {bucket}") as step:
        step("checking the bucket")
        ctx.require_bucket(bucket)
        store = ctx.store()
        step("reading its rules")
        before, settings = read_config(store, bucket)
        merged, change = merge_rule(before, ours)
        if change != "unchanged":
            step("writing its rules")
            write_rules(store, bucket, merged, settings)
            step("reading them back")
            _check_kept(read_rules(store, bucket), ours, bucket)
    others = overlapping_abort_rules(merged, ours)
    data = {
        "bucket": bucket,
        "change": change,
        "rule": ours,
        "rules": len(merged),
        "overlapping": [r.get("ID") for r in others],
    }
    log.info("lifecycle rule %s of bucket %s: %s", ours["ID"], bucket, change)
    return Result(
        data,
        lambda out: _render_set(
            out, bucket, change, ours, merged, others, args.prefix != prefix and bool(args.prefix)
        ),
    )


def _check_kept(rules: Sequence[Mapping[str, Any]], ours: Mapping[str, Any], bucket: str) -> None:
    kept = next((r for r in rules if r.get("ID") == ours["ID"]), None)
    if (
        kept is None
        or abort_days(kept) != abort_days(ours)
        or rule_prefix(kept) != rule_prefix(ours)
    ):
        raise StoreError(
            f"the S3 server accepted the lifecycle configuration of bucket "
            f"{bucket} but did not keep rule {ours['ID']} as written (read back: "
            f"{kept}); it may not support AbortIncompleteMultipartUpload",
            operation="GetBucketLifecycleConfiguration",
        )


def _render_set(
    out: Output,
    bucket: str,
    change: str,
    ours: Rule,
    merged: list[Rule],
    others: list[Mapping[str, Any]],
    slash_added: bool,
) -> None:
    scope, action = describe(ours)
    if slash_added:
        out.say(f"prefix ends in '/' so that it cannot match sibling paths: {scope}")
    out.say(
        f"{change} rule {ours['ID']} on bucket {bucket}: {action} ({scope}); "
        f"{len(merged) - 1} other rule(s) kept"
    )
    for rule in others:
        scope, action = describe(rule)
        out.say(
            f"note: rule {rule.get('ID')} also aborts incomplete uploads ({action}, "
            f"{scope}); whichever comes first aborts an upload",
            style="yellow",
        )


def run_show(ctx: Context, args: argparse.Namespace) -> Result:
    bucket = bucket_name(args.bucket)
    with ctx.out.steps(f"lifecycle of bucket {bucket}") as step:
        step("checking the bucket")
        ctx.require_bucket(bucket)
        step("reading its rules")
        rules = read_rules(ctx.store(), bucket)
    aborting = [
        r.get("ID") for r in rules if r.get("Status") == "Enabled" and abort_days(r) is not None
    ]
    ours = next((r for r in rules if r.get("ID") == RULE_ID), None)
    data = {
        "bucket": bucket,
        "rules": rules,
        "zero_rename_rule": ours,
        "aborting_incomplete_uploads": aborting,
    }
    return Result(data, lambda out: _render_show(out, bucket, rules, aborting))


def _render_show(out: Output, bucket: str, rules: list[Rule], aborting: list[Any]) -> None:
    if not rules:
        out.say(f"bucket {bucket} has no lifecycle rules")
    else:
        out.table(
            ["id", "status", "applies to", "does"],
            ([r.get("ID"), r.get("Status"), *describe(r)] for r in rules),
        )
    if not aborting:
        out.say(
            f"no rule aborts abandoned uploads: zero-rename lifecycle set {bucket} --days 1",
            style="yellow",
        )
