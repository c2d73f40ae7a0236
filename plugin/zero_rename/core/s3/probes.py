"""Probing an S3 store for the behaviours the protocol depends on.

:func:`detect` is the cheap probe job setup runs (eleven requests, twelve where
If-Match needs an unquoted ETag; once per process and bucket): conditional
create, compare-and-swap with the object's own ETag (which must succeed) and
with another (which must fail), and whether pending uploads can be listed by
prefix. It sends one request at a time, so whether conditional writes hold
under a race is left to :func:`examine`, which runs every probe and the races
of :mod:`zero_rename.core.s3.races`, for ``zero-rename doctor``. Both work under a
scratch prefix inside the destination's hidden directory and remove what they
created.
"""

from __future__ import annotations

import functools
import logging
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from botocore.exceptions import BotoCoreError, ClientError

from zero_rename.core.s3 import profile_record
from zero_rename.core.s3.backoff import backoff
from zero_rename.core.s3.client import S3Store, translate
from zero_rename.core.s3.profile_record import RecordSite as ProbeSite
from zero_rename.core.s3.profiles import (
    AUTO,
    IfMatchForm,
    IfMatchMissing,
    Recomplete,
    StoreProfile,
    named_profile,
)
from zero_rename.core.s3.progress import Steps, no_steps
from zero_rename.core.s3.races import RACE_ROUNDS, Race, run_races
from zero_rename.core.s3.rounds import one_round
from zero_rename.core.s3.writes import CREATE_ROUNDS
from zero_rename.errors import ConditionalConflict, NoSuchUpload, PreconditionFailed, StoreError

log = logging.getLogger(__name__)

# An ETag no object has: the probes' "wrong" If-Match value.
_WRONG_ETAG = '"00000000000000000000000000000000"'

Status = Literal["ok", "fallback", "unsafe", "info"]

# What :func:`detect` probes and concludes: a record of another version is
# probed again. Raise it whenever detect's probes or their reading change.
PROBE_VERSION = 1

_CACHE_LOCK = threading.Lock()
_DETECTED: dict[tuple[str, str], StoreProfile] = {}


@dataclass(frozen=True)
class Check:
    """One probed behaviour: what the store did, and what the committer does about it."""

    behaviour: str
    observed: str
    status: Status
    committer: str


def scratch_prefix(dest: ProbeSite) -> str:
    return f"{dest.hidden_dir}probe-{uuid.uuid4().hex}/"


def resolve_profile(
    store: S3Store,
    dest: ProbeSite,
    setting: str,
    checks: Callable[[], object] = lambda: None,
) -> StoreProfile:
    """The profile a job at ``dest`` runs with: a named one as declared, or (``auto``)
    the store's probed behaviour, cached per process, endpoint and bucket, and
    kept beside the destination (:mod:`zero_rename.core.s3.profile_record`) for
    ``StoreConfig.profile_max_age`` (0: probed once a process, as before).

    ``checks``: the caller's checks of the destination (job setup's), sent in the
    same round trip as the record's read; their error wins over the read's, and
    nothing is probed or written before they pass."""
    if setting != AUTO:
        checks()
        return named_profile(setting)
    cache_key = (store.endpoint_url, dest.bucket)
    with _CACHE_LOCK:
        cached = _DETECTED.get(cache_key)
    if cached is not None:
        checks()
        return cached
    profile = _kept_or_probed(store, dest, checks)
    with _CACHE_LOCK:
        _DETECTED[cache_key] = profile
    return profile


def _kept_or_probed(store: S3Store, dest: ProbeSite, checks: Callable[[], object]) -> StoreProfile:
    """The profile the destination's record keeps, else a probe's, then kept."""
    if not profile_record.max_age(store):
        checks()
        return detect(store, dest)
    now = datetime.now(UTC)
    read, _ = one_round(lambda: profile_record.read_record(store, dest, PROBE_VERSION, now), checks)
    kept: StoreProfile | None = read[0]
    etag: str | None = read[1]
    if kept is not None:
        log.info("the S3 store's profile for %s, as probed before: %s", dest.url, kept)
        return kept
    profile = detect(store, dest)
    if not profile.problems():  # an unsafe store is refused at every job, never kept
        profile_record.write_record(store, dest, profile, PROBE_VERSION, now, etag)
    return profile


def detect(store: S3Store, dest: ProbeSite) -> StoreProfile:
    """Probe what the protocol cannot run without, and what selects a fallback."""
    scratch = scratch_prefix(dest)
    try:
        checks = _conditional_checks(store, dest.bucket, scratch)
        checks.update(_prefix_listing_check(store, dest.bucket, scratch))
    finally:
        _remove_scratch(store, dest.bucket, scratch)
    profile = StoreProfile(name=AUTO, **checks)
    log.info(
        "probed the S3 store at %s for %s: %s",
        store.endpoint_url,
        dest.url,
        profile.model_dump(exclude={"name"}),
    )
    return profile


def _conditional_checks(
    store: S3Store, bucket: str, scratch: str, forms: list[IfMatchForm] | None = None
) -> dict[str, Any]:
    """Conditional create, then compare-and-swap: with the object's own ETag it must
    succeed (as S3 returned it, else unquoted), with another it must fail. ``forms``
    (given: every form is tried) collects the forms the store accepted."""
    key = scratch + "conditional"
    plain = _as_given(store)
    etag = str(_settled(lambda: plain.put_object(bucket, key, b"1", if_none_match=True)))
    create = _refused(lambda: plain.put_object(bucket, key, b"2", if_none_match=True))
    accepted = _accepted_forms(plain, bucket, key, etag, every=forms is not None)
    if forms is not None:
        forms.extend(accepted)
    form: IfMatchForm = accepted[0] if accepted else "refused"
    # The wrong ETag goes in the form that works: a store refusing every quoted
    # ETag would refuse a wrong quoted one too, which proves nothing.
    swapping = store.with_profile(StoreProfile(name=AUTO, if_match_form=form))
    replace = _refused(lambda: swapping.put_object(bucket, key, b"4", if_match=_WRONG_ETAG))
    return {
        "conditional_create": create,
        "conditional_replace": replace,
        "if_match_form": form,
        "if_match_missing": _if_match_missing(swapping, bucket, scratch + "missing"),
    }


def _accepted_forms(
    store: S3Store, bucket: str, key: str, etag: str, *, every: bool
) -> list[IfMatchForm]:
    """The forms of its own ETag the store's If-Match accepted, tried in order
    (as returned, then unquoted) up to the first accepted one, or ``every`` one."""
    accepted: list[IfMatchForm] = []
    candidates: tuple[tuple[IfMatchForm, bytes], ...] = (("as-returned", b"3"), ("unquoted", b"5"))
    for form, body in candidates:
        value = StoreProfile(name=AUTO, if_match_form=form).if_match_value(etag)
        try:
            etag = str(
                _settled(functools.partial(store.put_object, bucket, key, body, if_match=value))
            )
        except PreconditionFailed:
            continue
        accepted.append(form)
        if not every:
            break
    return accepted


def _as_given(store: S3Store) -> S3Store:
    """The store sending every If-Match exactly as given, whatever its profile says."""
    return S3Store(store.client, store.stats, None, store.config)


def _settled(write: Callable[[], object]) -> object:
    """Run a conditional write, again after a 409 (AWS: a racing operation; retry)."""
    for round_number in range(CREATE_ROUNDS):
        try:
            return write()
        except ConditionalConflict:
            if round_number == CREATE_ROUNDS - 1:
                raise
            backoff(round_number)
    raise AssertionError("unreachable")


def _refused(write: Callable[[], object]) -> bool:
    try:
        _settled(write)
    except PreconditionFailed:
        return True
    return False


def _if_match_missing(store: S3Store, bucket: str, key: str) -> IfMatchMissing:
    try:
        _settled(lambda: store.put_object(bucket, key, b"x", if_match=_WRONG_ETAG))
    except PreconditionFailed as exc:
        return "404" if exc.code in ("NoSuchKey", "404") else "412"
    return "ignored"


def _prefix_listing_check(store: S3Store, bucket: str, scratch: str) -> dict[str, Any]:
    key = scratch + "listing/pending"
    upload_id = store.create_upload(bucket, key)
    try:
        found = _raw_upload_keys(store, bucket, scratch)
    finally:
        store.abort_upload(bucket, key, upload_id)
    return {"uploads_by_prefix": key in found}


def _raw_upload_keys(store: S3Store, bucket: str, prefix: str, **more: Any) -> list[str]:
    """One raw ListMultipartUploads page, as the store answers it."""
    response = _raw(
        store, "ListMultipartUploads", bucket, prefix, Bucket=bucket, Prefix=prefix, **more
    )
    return [str(u["Key"]) for u in response.get("Uploads", [])]


def _raw(store: S3Store, op: str, bucket: str, where: str, **kwargs: Any) -> dict[str, Any]:
    method = {"ListMultipartUploads": store.client.list_multipart_uploads}[op]
    try:
        return dict(method(**kwargs))
    except (ClientError, BotoCoreError) as exc:
        raise translate(exc, op, f"s3://{bucket}/{where}") from exc


def _remove_scratch(store: S3Store, bucket: str, scratch: str) -> None:
    """Best effort: a probe's leftovers are hidden, tiny, and named as probes."""
    try:
        for upload in store.list_uploads(bucket, scratch):
            store.abort_upload(bucket, upload.key, upload.upload_id)
        keys = [o.key for o in store.list_objects(bucket, scratch)]
        if keys:
            store.delete_objects(bucket, keys)
    except StoreError:
        log.warning(
            "could not remove the store probe's objects under s3://%s/%s",
            bucket,
            scratch,
            exc_info=True,
        )


# -- the doctor's full examination -------------------------------------------------
@dataclass(frozen=True)
class Examination:
    """What :func:`examine` found: the profile the committer would use on the store,
    one :class:`Check` per behaviour, the races run, the forms of its own ETag the
    store's If-Match accepted, and why the protocol cannot run there (empty: it can)."""

    profile: StoreProfile
    checks: list[Check]
    races: list[Race]
    if_match_forms: tuple[IfMatchForm, ...]
    problems: list[str]

    @property
    def safe(self) -> bool:
        return not self.problems


def examine(
    store: S3Store, dest: ProbeSite, race_rounds: int = RACE_ROUNDS, steps: Steps = no_steps
) -> Examination:
    """Every probe, against the store at ``dest``, the races ``race_rounds`` times each
    (0: none); ``steps`` names each probe and race as it begins."""
    scratch = scratch_prefix(dest)
    cleaner = store
    forms: list[IfMatchForm] = []
    try:
        steps("conditional writes")
        values = _conditional_checks(store, dest.bucket, scratch, forms)
        steps("listing uploads by prefix")
        values.update(_prefix_listing_check(store, dest.bucket, scratch))
        # From here on, list uploads and swap the way the committer would on this store.
        cleaner = store = store.with_profile(StoreProfile(name=AUTO, **values))
        steps("conditional and repeated completes")
        values["conditional_complete"] = _conditional_complete(store, dest.bucket, scratch)
        values["recomplete"] = _recomplete(store, dest.bucket, scratch)
        profile = StoreProfile(name=AUTO, **values)
        checks = _profile_checks(profile, forms)
        steps("a complete after an abort")
        checks.append(_complete_after_abort(store, dest.bucket, scratch))
        steps("listing prefixes and pages")
        checks.append(_prefix_exactness(store, dest.bucket, scratch))
        checks.append(_upload_paging(store, dest.bucket, scratch))
        races = run_races(store, profile, dest.bucket, scratch + "race/", race_rounds, steps)
    finally:
        steps("removing what the probes wrote")
        _remove_scratch(cleaner, dest.bucket, scratch)
    checks += [_race_check(race) for race in races]
    checks.append(
        Check(
            "409 ConditionalRequestConflict",
            "cannot be provoked on demand",
            "info",
            "read as a lost round and retried, never as a failure",
        )
    )
    problems = profile.problems() + [p for p in (_race_problem(r) for r in races) if p]
    return Examination(profile, checks, races, tuple(forms), problems)


def _profile_checks(p: StoreProfile, forms: Sequence[IfMatchForm]) -> list[Check]:
    yes = "honoured"
    return [
        Check(
            "PutObject If-None-Match: *",
            yes if p.conditional_create else "ignored",
            "ok" if p.conditional_create else "unsafe",
            "creates job records, manifests, plans and claims once"
            if p.conditional_create
            else "refuses to run: two processes could both create one object",
        ),
        Check(
            "PutObject If-Match (compare-and-swap)",
            yes if p.conditional_replace else "ignored",
            "ok" if p.conditional_replace else "unsafe",
            "decides each job exactly once"
            if p.conditional_replace
            else "refuses to run: a commit and an abort could both decide a job",
        ),
        _swap_form_check(p, forms),
        Check(
            "If-Match on a missing key",
            {
                "404": "404 NoSuchKey (as AWS)",
                "412": "412 PreconditionFailed",
                "ignored": "ignored: the object was written",
                "unknown": "not probed",
            }[p.if_match_missing],
            "info" if p.if_match_missing != "ignored" else "fallback",
            "reads both answers as a lost compare-and-swap"
            if p.if_match_missing != "ignored"
            else "never compare-and-swaps a record it has not just read",
        ),
        Check(
            "ListMultipartUploads by prefix",
            "prefix" if p.uploads_by_prefix else "prefix taken as one exact key (as MinIO)",
            "ok" if p.uploads_by_prefix else "fallback",
            "finds a job's pending uploads by prefix"
            if p.uploads_by_prefix
            else "lists the bucket's uploads without a prefix and filters them",
        ),
        Check(
            "CompleteMultipartUpload If-None-Match: *",
            {True: yes, False: "ignored", None: "not supported"}[p.conditional_complete],
            "info",
            "not relied on: every file name carries its job id",
        ),
        Check(
            "complete of an already completed upload",
            _RECOMPLETE[p.recomplete],
            "info",
            "a resumed commit lists pending uploads and checks the others by ETag",
        ),
    ]


def _swap_form_check(p: StoreProfile, forms: Sequence[IfMatchForm]) -> Check:
    """Whether a compare-and-swap with the object's own ETag succeeds, and in which form."""
    behaviour = "If-Match with the object's own ETag"
    if p.if_match_form == "refused":
        return Check(
            behaviour,
            "refused, quoted and unquoted",
            "unsafe",
            "refuses to run: no compare-and-swap could succeed, a job record never advance",
        )
    if p.if_match_form == "unquoted":
        return Check(
            behaviour,
            "accepted unquoted only; refused quoted as S3 returns it (as Ceph RGW 16)",
            "fallback",
            "sends every If-Match ETag unquoted (store profile ceph does too)",
        )
    both = "unquoted" in forms
    return Check(
        behaviour,
        "accepted as returned" + (" and unquoted" if both else ""),
        "ok",
        "sends the ETag as the store returned it",
    )


_RACED: dict[str, tuple[str, str, str]] = {
    # name: (what raced, the committer when atomic, what could happen when not)
    "create": (
        "PutObject If-None-Match: * on one key",
        "creates job records, manifests, plans and claims once",
        "two processes could both create one job record or claim",
    ),
    "swap": (
        "compare-and-swaps from one ETag",
        "decides each job exactly once",
        "a commit and an abort could both decide a job",
    ),
    "complete": (
        "CompleteMultipartUpload If-None-Match: * to one key",
        "not relied on: every file name carries its job id",
        "",
    ),
}


def _race_check(race: Race) -> Check:
    what, atomic, risk = _RACED[race.name]
    if race.atomic:
        observed = f"atomic: at most one winner in each of {race.rounds} round(s)"
    else:
        observed = (
            f"not atomic: more than one winner in {race.broken} of {race.rounds} round(s) "
            f"(winners per round: {', '.join(map(str, race.winners))})"
        )
    status: Status
    if race.name == "complete":  # reported only: the protocol never relies on it
        status, committer = "info", atomic
    else:
        status = "ok" if race.atomic else "unsafe"
        committer = atomic if race.atomic else f"refuses to run: {risk}"
    return Check(f"{race.racers} racing {what}", observed, status, committer)


def _race_problem(race: Race) -> str | None:
    """Why a race's outcome makes the store unsafe, if it does."""
    what, _, risk = _RACED[race.name]
    if race.atomic or not risk:
        return None
    return (
        f"{race.racers} racing {what} had more than one winner in {race.broken} of "
        f"{race.rounds} round(s), so {risk}"
    )


_RECOMPLETE: dict[Recomplete, str] = {
    "same-etag": "200, same ETag (as AWS)",
    "no-such-upload": "404 NoSuchUpload (as MinIO)",
    "error": "an error other than NoSuchUpload",
    "unknown": "not probed",
}


def _one_part_upload(store: S3Store, bucket: str, key: str) -> tuple[str, list[tuple[int, str]]]:
    upload_id = store.create_upload(bucket, key)
    etag = store.upload_part(bucket, key, upload_id, 1, b"probe")
    return upload_id, [(1, etag)]


def _conditional_complete(store: S3Store, bucket: str, scratch: str) -> bool | None:
    key = scratch + "conditional"  # exists: written by the conditional checks
    upload_id, parts = _one_part_upload(store, bucket, key)
    try:
        store.complete_upload(bucket, key, upload_id, parts, if_none_match=True)
    except PreconditionFailed:
        store.abort_upload(bucket, key, upload_id)
        return True
    except StoreError as exc:
        log.info("conditional complete probe: %s", exc)
        store.abort_upload(bucket, key, upload_id)
        return None
    return False


def _recomplete(store: S3Store, bucket: str, scratch: str) -> Recomplete:
    key = scratch + "recomplete"
    upload_id, parts = _one_part_upload(store, bucket, key)
    first = store.complete_upload(bucket, key, upload_id, parts)
    try:
        again = store.complete_upload(bucket, key, upload_id, parts)
    except NoSuchUpload:
        return "no-such-upload"
    except StoreError:
        return "error"
    return "same-etag" if again.strip('"') == first.strip('"') else "error"


def _complete_after_abort(store: S3Store, bucket: str, scratch: str) -> Check:
    key = scratch + "aborted"
    upload_id, parts = _one_part_upload(store, bucket, key)
    store.abort_upload(bucket, key, upload_id)
    try:
        store.complete_upload(bucket, key, upload_id, parts)
        observed, status = "completed anyway", "unsafe"
    except NoSuchUpload:
        observed, status = "404 NoSuchUpload (as AWS)", "ok"
    except StoreError as exc:
        observed, status = f"{exc.code or exc.status or 'error'} (AWS: 404 NoSuchUpload)", "info"
    return Check(
        "complete of an aborted upload",
        observed,
        status,  # type: ignore[arg-type]
        "checks the object's ETag before believing any answer",
    )


def _prefix_exactness(store: S3Store, bucket: str, scratch: str) -> Check:
    for key in (scratch + "d1/x", scratch + "d10/x"):
        store.create_upload(bucket, key)
    found = _raw_upload_keys(store, bucket, scratch + "d1/")
    observed = (
        "only d1/"
        if found == [scratch + "d1/x"]
        else "d1/ and d10/"
        if scratch + "d10/x" in found
        else f"{len(found)} upload(s)"
    )
    return Check(
        "upload listing prefix 'd1/' next to 'd10/'",
        observed,
        "info",
        "always lists with a trailing '/' and filters keys by prefix itself",
    )


def _upload_paging(store: S3Store, bucket: str, scratch: str) -> Check:
    response = _raw(
        store, "ListMultipartUploads", bucket, scratch, Bucket=bucket, Prefix=scratch, MaxUploads=1
    )
    truncated = bool(response.get("IsTruncated"))
    marker = bool(response.get("NextKeyMarker"))
    observed = (
        "pages with markers"
        if truncated and marker
        else "truncated without NextKeyMarker"
        if truncated
        else f"ignores MaxUploads ({len(response.get('Uploads', []))} in one page)"
    )
    complete = sorted(u.key for u in store.list_uploads(bucket, scratch))
    ok = complete == sorted([scratch + "d1/x", scratch + "d10/x"])
    return Check(
        "ListMultipartUploads paging",
        observed,
        "ok" if ok else "unsafe",
        "asks for no page size, follows markers, and stops with an error "
        "rather than restart a listing that does not advance",
    )
