"""``zero-rename doctor DEST``: can the committer run safely on this S3 store?

Runs every store probe (:func:`zero_rename.core.probes.examine`) under a scratch
prefix in DEST's hidden directory, removes what it wrote, and prints what the
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
from zero_rename.core.layout import Destination
from zero_rename.core.probes import Check, examine
from zero_rename.core.profiles import AUTO, PROFILES, StoreProfile, named_profile

# The behaviours a declared profile may not overstate: each selects what the
# committer does, so a wrong declaration would pick the wrong path.
_DECIDING = ("conditional_create", "conditional_replace", "uploads_by_prefix")
_STYLE = {"ok": "green", "fallback": "yellow", "unsafe": "bold red", "info": ""}


def register(groups: Subcommands, common: argparse.ArgumentParser) -> None:
    command(
        groups,
        "doctor",
        common,
        run_doctor,
        dest="s3://bucket/path (probes write only under DEST/_zero_rename/)",
        help="check that an S3 store can run the protocol",
        description="Probe the S3 store behind DEST for every behaviour the commit "
        "protocol depends on (conditional writes, listing pending uploads by "
        "prefix, answers to repeated and aborted completes, paging), under a "
        "scratch prefix in DEST/_zero_rename/ that it removes afterwards. "
        "Prints what works and what the committer does; exit code 1 when the "
        "store cannot run the protocol safely.",
    )


def run_doctor(ctx: Context, args: argparse.Namespace) -> Result:
    dest = ctx.destination(args.dest)
    ctx.out.say(f"probing the S3 store under {dest.url}/_zero_rename/ ...")
    profile, checks = examine(ctx.store().scoped(), dest)
    declared = ctx.config.profile
    mismatches = _overstated(named_profile(declared), profile) if declared != AUTO else []
    endpoint = ctx.endpoint
    data = {
        "destination": dest.url,
        "endpoint": endpoint,
        "declared_profile": declared,
        "like": _closest(profile),
        "safe": not profile.problems(),
        "problems": profile.problems(),
        "mismatches": mismatches,
        "profile": profile.model_dump(exclude={"name"}),
        "checks": [c.__dict__ for c in checks],
    }
    code = ExitCode.OK if data["safe"] and not mismatches else ExitCode.FAILED
    return Result(data, lambda out: _render(out, dest, endpoint, checks, data), code)


def _overstated(declared: StoreProfile, probed: StoreProfile) -> list[str]:
    """Where a declared profile would make the committer do the wrong thing here."""
    found = [
        f"--store-profile {declared.name} says {field} is {getattr(declared, field)}, "
        "but the store behaves otherwise"
        for field in _DECIDING
        if getattr(declared, field) != getattr(probed, field)
    ]
    if declared.problems() and not probed.problems():
        found.append(
            f"--store-profile {declared.name} makes the committer refuse to run, "
            "but this store has what the protocol needs"
        )
    return found


def _closest(profile: StoreProfile) -> list[str]:
    """Store families whose declared profile matches what was probed, where it decides."""
    return [
        name
        for name, p in PROFILES.items()
        if all(getattr(p, f) == getattr(profile, f) for f in _DECIDING)
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
    if data["problems"]:
        for problem in data["problems"]:
            out.say(f"problem: {problem}", style=_STYLE["unsafe"])
        out.say("the committer refuses to set up jobs on this store", style=_STYLE["unsafe"])
    else:
        out.say("the committer can run on this store safely", style=_STYLE["ok"])
