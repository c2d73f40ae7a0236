"""``zero-rename doctor DEST``: can the committer run safely on this S3 store?

Runs every store probe (:func:`zero_rename.core.s3.probes.examine`) under a scratch
prefix in DEST's hidden directory, races conditional writes against each other
(:mod:`zero_rename.core.s3.races`), removes what it wrote, and prints what the
store did and what the committer does about it. Exit code 1 when the store
cannot run the protocol safely, or when a declared ``--store-profile``
promises a behaviour the store does not have.
"""

from __future__ import annotations

import argparse
from typing import Any

from zero_rename.cli.arguments import Subcommands, command
from zero_rename.cli.context import Context
from zero_rename.cli.exits import ExitCode
from zero_rename.cli.output import Output, Result
from zero_rename.core import (
    AUTO_PROFILE,
    PROFILES,
    RACE_ROUNDS,
    RACERS,
    Check,
    Committer,
    Destination,
    Examination,
    StoreProfile,
    examine,
    named_profile,
)

# A round of the three races is 45 requests; enough rounds to see a rare
# double winner, few enough that a typing error cannot flood a store.
MAX_RACE_ROUNDS = 50

# The behaviours a declared profile may not overstate: each selects what the
# committer does, so a wrong declaration would pick the wrong path.
_DECIDING = ("conditional_create", "conditional_replace", "uploads_by_prefix")
_STYLE = {"ok": "green", "fallback": "yellow", "unsafe": "bold red", "info": ""}


def register(groups: Subcommands, common: argparse.ArgumentParser) -> None:
    parser = command(
        groups,
        "doctor",
        common,
        run_doctor,
        dest="s3://bucket/path (probes write only under DEST/_zero_rename/)",
        help="check that an S3 store can run the protocol",
        description="Probe the S3 store behind DEST for every behaviour the commit "
        "protocol depends on (conditional writes, compare-and-swap with the right "
        "and a wrong ETag, listing pending uploads by prefix, answers to repeated "
        "and aborted completes, paging), then race conditional writes to one key "
        f"({RACERS['create']} creates, {RACERS['swap']} compare-and-swaps, "
        f"{RACERS['complete']} completes) to see that exactly one wins, under a "
        "scratch prefix in DEST/_zero_rename/ that it removes afterwards. "
        "Prints what works and what the committer does; exit code 1 when the "
        "store cannot run the protocol safely.",
    )
    parser.add_argument(
        "--race-rounds",
        type=_race_rounds,
        default=RACE_ROUNDS,
        metavar="N",
        help=f"rounds of each race (default {RACE_ROUNDS}; 0 skips the races, "
        f"and then nothing is said of atomicity; at most {MAX_RACE_ROUNDS})",
    )


def _race_rounds(text: str) -> int:
    value = int(text) if text.strip().isdigit() else -1
    if not 0 <= value <= MAX_RACE_ROUNDS:
        raise argparse.ArgumentTypeError(
            f"{text[:20]!r} is not a whole number from 0 to {MAX_RACE_ROUNDS}"
        )
    return value


def run_doctor(ctx: Context, args: argparse.Namespace) -> Result:
    dest = ctx.destination(args.dest)
    ctx.out.say(f"probing the S3 store under {dest.url}/_zero_rename/ ...")
    # Probes and races take seconds (a round of races up to 4 s on SeaweedFS).
    with ctx.out.steps("probing") as step:
        found = examine(ctx.store().scoped(), dest, args.race_rounds, step)
    with ctx.out.progress("reading the job records", unit="records") as advance:
        strays = Committer(dest, store=ctx.store()).stray_records(advance)
    profile = found.profile
    declared = ctx.config.profile
    mismatches = _overstated(named_profile(declared), found) if declared != AUTO_PROFILE else []
    endpoint = ctx.endpoint
    data = {
        "destination": dest.url,
        "endpoint": endpoint,
        "declared_profile": declared,
        "like": _closest(found),
        "safe": found.safe,
        "problems": found.problems,
        # Job setup's probe sees these; races only the doctor runs.
        "refused_at_setup": bool(profile.problems()),
        "mismatches": mismatches,
        # Every field, the ETag form included (job records leave out its default).
        "profile": profile.model_dump(mode="python", exclude={"name"}),
        "if_match_forms": list(found.if_match_forms),
        "race_rounds": args.race_rounds,
        "races": {
            r.name: {
                "racers": r.racers,
                "rounds": r.rounds,
                "broken_rounds": r.broken,
                "winners": list(r.winners),
                "atomic": r.atomic,
            }
            for r in found.races
        },
        "checks": [c.__dict__ for c in found.checks],
        # Objects under jobs/ that readers leave out: reported, no risk to the protocol.
        "stray_records": [{"key": s.key, "reason": s.reason} for s in strays],
    }
    code = ExitCode.OK if data["safe"] and not mismatches else ExitCode.FAILED
    return Result(data, lambda out: _render(out, dest, endpoint, found.checks, data), code)


def _overstated(declared: StoreProfile, found: Examination) -> list[str]:
    """Where a declared profile would make the committer do the wrong thing here."""
    probed = found.profile
    mismatched = [
        f"{field} is {getattr(declared, field)}"
        for field in _DECIDING
        if getattr(declared, field) != getattr(probed, field)
    ]
    if not _form_fits(declared, found):
        mismatched.append(f"If-Match carries the ETag {declared.if_match_form}")
    issues = [
        f"--store-profile {declared.name} says {m}, but the store behaves otherwise"
        for m in mismatched
    ]
    if declared.problems() and not found.problems:
        issues.append(
            f"--store-profile {declared.name} makes the committer refuse to run, "
            "but this store has what the protocol needs"
        )
    return issues


def _form_fits(declared: StoreProfile, found: Examination) -> bool:
    """Whether the store accepts the ETag form the declared profile sends."""
    return declared.if_match_form in found.if_match_forms or (
        declared.if_match_form == "refused" == found.profile.if_match_form
    )


def _closest(found: Examination) -> list[str]:
    """Store families whose declared profile matches what was probed, where it decides."""
    return [
        name
        for name, p in PROFILES.items()
        if all(getattr(p, f) == getattr(found.profile, f) for f in _DECIDING)
        and _form_fits(p, found)
    ]


def _render(
    out: Output, dest: Destination, endpoint: str, checks: list[Check], data: dict[str, Any]
) -> None:
    out.heading(f"S3 store at {endpoint}, probed under {dest.url}/_zero_rename/")
    out.table(
        ["behaviour", "the store", "", "the committer"],
        ([c.behaviour, c.observed, c.status, c.committer] for c in checks),
    )
    for check in checks:
        if check.status == "unsafe":
            out.say(f"unsafe: {check.behaviour}: {check.observed}", style=_STYLE["unsafe"])
    if data["like"]:
        out.say(f"behaves like: {', '.join(data['like'])} (where it matters)")
    for mismatch in data["mismatches"]:
        out.say(
            f"wrong profile: {mismatch}; use --store-profile auto or "
            f"{' or '.join(data['like']) or 'auto'}",
            style=_STYLE["unsafe"],
        )
    _render_findings(out, data)


def _render_findings(out: Output, data: dict[str, Any]) -> None:
    """What the races, the records and the problems found, and the verdict."""
    complete = data["races"].get("complete")
    if complete and not complete["atomic"]:
        out.say(
            "note: racing conditional completes can both win here; the protocol never "
            "relies on them (every file name carries its job id)"
        )
    if not data["race_rounds"]:
        out.say("races skipped (--race-rounds 0): whether conditional writes are atomic is unknown")
    for stray in data["stray_records"]:
        out.say(
            f"stray job record: {stray['key']}: {stray['reason']}; no reader reads it as a "
            "job (remove it, or keep copies outside _zero_rename/jobs/)",
            style=_STYLE["fallback"],
        )
    for problem in data["problems"]:
        out.say(f"problem: {problem}", style=_STYLE["unsafe"])
    if data["refused_at_setup"]:
        out.say("the committer refuses to set up jobs on this store", style=_STYLE["unsafe"])
    elif data["problems"]:
        out.say(
            "the committer cannot run on this store safely; job setup's probe does not "
            "race writes and would not notice, so do not point it here",
            style=_STYLE["unsafe"],
        )
    else:
        out.say("the committer can run on this store safely", style=_STYLE["ok"])
