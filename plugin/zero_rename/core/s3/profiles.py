"""Store profiles: what an S3 store does where the protocol leans on it.

S3-compatible stores differ exactly where a commit protocol depends on them
(conditional writes, listing pending uploads by prefix, answers to a repeated
complete). A profile names those behaviours for one store family; the
committer reads it to pick a fallback, or to refuse a store it cannot run on
safely. ``auto`` (the default) probes the destination's bucket once per
process at job setup (:mod:`zero_rename.core.s3.probes`); the job record keeps
the profile, so every later step of the job behaves the same way.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, SerializationInfo, model_serializer

from zero_rename.errors import ConfigError, StoreCapabilityError
from zero_rename.frozen import frozen

IfMatchMissing = Literal["404", "412", "ignored", "unknown"]
Recomplete = Literal["same-etag", "no-such-upload", "error", "unknown"]
IfMatchForm = Literal["as-returned", "unquoted", "refused"]

AUTO = "auto"


class StoreProfile(BaseModel):
    """The behaviours of one store the protocol depends on.

    - ``conditional_create``: PutObject with ``If-None-Match: *`` fails (412)
      when the key exists. Required: job records, manifests, plans and claims
      are created with it.
    - ``conditional_replace``: PutObject with ``If-Match`` fails when the ETag
      differs. Required: the job record and the claims advance by compare-and-swap.
    - ``if_match_form``: how If-Match must carry the ETag for the swap to succeed:
      ``as-returned`` (quotes included, as S3 returns it; AWS ignores quoting),
      ``unquoted`` (Ceph RGW 16 refuses every quoted ETag, so its swaps would
      never succeed), or ``refused``: the store refused its own ETag in both
      forms, so no compare-and-swap could ever succeed there. Every If-Match the
      store sends goes in this form (:meth:`if_match_value`).
    - ``uploads_by_prefix``: ListMultipartUploads takes ``Prefix`` as a key
      prefix. MinIO takes it as one exact key (minio/minio#20989); the fallback
      lists the bucket's uploads without a prefix and filters them here.
    - ``conditional_complete``: CompleteMultipartUpload honours ``If-None-Match``
      (not used by the protocol: job ids make keys unique; reported by the doctor).
    - ``if_match_missing``: the answer to If-Match on a missing key (AWS 404,
      SeaweedFS 412); both read as a lost compare-and-swap.
    - ``recomplete``: the answer to completing an already completed upload
      (AWS 200 with the same ETag, MinIO NoSuchUpload, moto and old Ceph a 500).
      A resumed commit never relies on it: it lists the job's pending uploads
      and checks every other planned file by its ETag.

    Every store may answer 409 ConditionalRequestConflict to racing conditional
    writes (AWS does); it is always read as a lost round and retried, so no
    profile needs to say so.
    """

    model_config = frozen()

    name: str
    conditional_create: bool = True
    conditional_replace: bool = True
    if_match_form: IfMatchForm = "as-returned"
    uploads_by_prefix: bool = True
    conditional_complete: bool | None = None
    if_match_missing: IfMatchMissing = "unknown"
    recomplete: Recomplete = "unknown"

    def problems(self) -> list[str]:
        """Why the protocol cannot run safely on this store; empty when it can."""
        found = []
        if not self.conditional_create:
            found.append(
                "PutObject ignores If-None-Match, so two processes could both create "
                "a job record, a task manifest or a claim"
            )
        if not self.conditional_replace:
            found.append(
                "PutObject ignores If-Match, so a commit and an abort could both decide a job"
            )
        if self.if_match_form == "refused":
            found.append(
                "PutObject refuses If-Match with the object's own ETag, quoted or not, so "
                "no compare-and-swap could succeed: a job record could never advance"
            )
        return found

    def if_match_value(self, etag: str) -> str:
        """``etag`` (as the store returned it) in the form this store's If-Match takes."""
        return etag.strip('"') if self.if_match_form == "unquoted" else etag

    @model_serializer(mode="wrap")
    def _serialize(self, handler: Any, info: SerializationInfo) -> dict[str, Any]:
        # Job records keep the profile. Leaving the default form out of them
        # keeps records of every store but Ceph RGW 16's (where earlier
        # versions could never commit anyway) readable by earlier versions,
        # whose profile has no such field and forbids unknown ones.
        data: dict[str, Any] = handler(self)
        if info.mode_is_json() and data.get("if_match_form") == "as-returned":
            del data["if_match_form"]
        return data

    def require_safe(self, where: str) -> StoreProfile:
        """Return self, or raise StoreCapabilityError naming what is missing."""
        problems = self.problems()
        if problems:
            raise StoreCapabilityError(
                f"the S3 store at {where} ({self.name}) cannot run the zero-rename protocol "
                f"safely: {'; '.join(problems)}. Nothing was written. Run `zero-rename doctor` "
                "against it for details"
            )
        return self


PROFILES: dict[str, StoreProfile] = {
    "aws": StoreProfile(
        name="aws", conditional_complete=True, if_match_missing="404", recomplete="same-etag"
    ),
    "minio": StoreProfile(
        name="minio",
        uploads_by_prefix=False,
        conditional_complete=True,
        if_match_missing="412",
        recomplete="no-such-upload",
    ),
    # Conditional CompleteMultipartUpload from v20 (Tentacle); an unknown upload
    # gave 500 on complete (ceph/s3-tests PR #728). RGW 16 (Pacific) refuses
    # every If-Match whose ETag is quoted as S3 returns it, and accepts it
    # unquoted; AWS ignores the quotes, and RGW compares the header with the
    # unquoted ETag it stores, so the unquoted form is sent to every Ceph.
    "ceph": StoreProfile(
        name="ceph",
        if_match_form="unquoted",
        conditional_complete=None,
        if_match_missing="404",
        recomplete="error",
    ),
    "r2": StoreProfile(name="r2", conditional_complete=True, recomplete="unknown"),
    # The XML API takes no S3 preconditions on writes ("Preconditions are not
    # supported" for multipart; create-if-absent only as x-goog-if-generation-match).
    "gcs": StoreProfile(
        name="gcs", conditional_create=False, conditional_replace=False, conditional_complete=False
    ),
    "seaweedfs": StoreProfile(
        name="seaweedfs", conditional_complete=True, if_match_missing="412", recomplete="same-etag"
    ),
}


def named_profile(name: str) -> StoreProfile:
    """The declared profile of a store family; raises ConfigError for an unknown name."""
    try:
        return PROFILES[name.strip().lower()]
    except KeyError:
        raise ConfigError(
            f"unknown store profile {name!r}; use {AUTO!r} (probe the store) or "
            f"one of {sorted(PROFILES)}"
        ) from None


def check_profile_name(name: str) -> str:
    """A valid ``profile`` setting, lower-cased."""
    text = name.strip().lower()
    if text != AUTO:
        named_profile(text)
    return text
