"""AWS Signature Version 4 for S3 requests, as botocore's ``S3SigV4Auth`` signs them.

The light request path (:mod:`zero_rename.core.s3.signing`) signs every request of
a store it serves, a few hundred bytes of canonical text and four HMACs. Signing
here, with ``hashlib`` and ``hmac``, spares each request botocore's request
object and each fresh process botocore's ``auth`` and ``utils`` modules (some
forty modules it would import for nothing else). The canonical request is
botocore's for S3: the path as sent (quoted once, never normalised), the query's
pairs sorted, every header given signed but ``user-agent`` and ``expect``, the
payload's SHA-256 signed and sent in ``x-amz-content-sha256``.

Credentials are the environment's where a whole static set is there (the first
source of botocore's chain); anything else (a profile, a role, a refreshing
set, only half a set) is botocore's chain's, loaded then.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from zero_rename.core.s3.client import CREDENTIALS_HELP
from zero_rename.errors import CredentialsError

ALGORITHM = "AWS4-HMAC-SHA256"
# Headers botocore leaves out of the signature: a proxy or the HTTP library may
# change them on the way.
_UNSIGNED = frozenset({"expect", "transfer-encoding", "user-agent", "x-amzn-trace-id"})
_DEFAULT_PORTS = {"http": 80, "https": 443}
# What a key id or a session token may hold to be sent in a header: printable
# ASCII without spaces (base64 tokens hold '+', '/' and '=').
_SENDABLE = re.compile(r"[\x21-\x7e]+")


@dataclass(frozen=True)
class StaticCredentials:
    """A static set: a key id, its secret, and a session token for temporary ones.
    ``get_frozen_credentials`` as botocore's credentials have it, for callers that
    take either."""

    access_key: str
    secret_key: str
    token: str | None = None

    def get_frozen_credentials(self) -> StaticCredentials:
        return self

    def __repr__(self) -> str:  # never the secret, wherever an object is shown
        return f"StaticCredentials(access_key={self.access_key[:4]}...)"


def environment_credentials() -> StaticCredentials | None:
    """A whole static set from the environment, as botocore's first provider
    reads it; None where the set is not whole or expires
    (``AWS_CREDENTIAL_EXPIRATION``): botocore's chain then decides."""
    key = os.environ.get("AWS_ACCESS_KEY_ID", "")
    secret = os.environ.get("AWS_SECRET_ACCESS_KEY", "")
    if not key or not secret or os.environ.get("AWS_CREDENTIAL_EXPIRATION"):
        return None
    token = os.environ.get("AWS_SESSION_TOKEN") or os.environ.get("AWS_SECURITY_TOKEN")
    return StaticCredentials(key, secret, token or None)


def signed_host(origin: str) -> str:
    """The Host header botocore signs for ``origin``: the port only where it is
    not the scheme's own, an IPv6 address in brackets."""
    parts = urlsplit(origin)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    if parts.port is not None and parts.port != _DEFAULT_PORTS.get(parts.scheme):
        host = f"{host}:{parts.port}"
    return host


class Signer:
    """Signs S3 requests to one host and region; thread-safe."""

    def __init__(self, host: str, region: str, service: str = "s3") -> None:
        self.host, self.region, self.service = host, region, service
        self._keys: dict[tuple[str, str], bytes] = {}
        self._lock = threading.Lock()

    def headers(
        self,
        credentials: Any,
        method: str,
        path: str,
        headers: Mapping[str, str],
        body: bytes,
        now: float | None = None,
    ) -> dict[str, str]:
        """``headers`` with the signature's added: ``path`` is quoted, its query
        included; ``credentials`` frozen (access_key, secret_key, token)."""
        _check_sendable(credentials)
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
        day = stamp[:8]
        signed = {k.lower(): " ".join(str(v).split()) for k, v in headers.items()}
        signed.pop("date", None)  # botocore drops it: X-Amz-Date is the date signed
        signed["host"] = self.host
        signed["x-amz-date"] = stamp
        signed["x-amz-content-sha256"] = hashlib.sha256(body).hexdigest()
        if credentials.token:
            signed["x-amz-security-token"] = credentials.token
        names = sorted(k for k in signed if k not in _UNSIGNED)
        uri, _, query = path.partition("?")
        canonical = "\n".join(
            (
                method.upper(),
                uri or "/",
                _canonical_query(query),
                "".join(f"{k}:{signed[k]}\n" for k in names),
                ";".join(names),
                signed["x-amz-content-sha256"],
            )
        )
        scope = f"{day}/{self.region}/{self.service}/aws4_request"
        to_sign = "\n".join(
            (ALGORITHM, stamp, scope, hashlib.sha256(canonical.encode()).hexdigest())
        )
        key = self._signing_key(credentials.secret_key, day)
        signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        signed["authorization"] = (
            f"{ALGORITHM} Credential={credentials.access_key}/{scope}, "
            f"SignedHeaders={';'.join(names)}, Signature={signature}"
        )
        return signed

    def _signing_key(self, secret: str, day: str) -> bytes:
        """The day's key for this region, derived once a day per secret."""
        with self._lock:
            key = self._keys.get((secret, day))
        if key is None:
            key = _hmac(("AWS4" + secret).encode(), day)
            for part in (self.region, self.service, "aws4_request"):
                key = _hmac(key, part)
            with self._lock:
                self._keys = {(secret, day): key}  # one day's key is all a store needs
        return key


def _check_sendable(credentials: Any) -> None:
    """Raises CredentialsError, naming neither value, for a key id or session
    token no HTTP header can carry: a control character or a space (a value
    pasted with its line end) would be refused by the HTTP library with the
    header quoted in its message, or split the header."""
    for what, value in (("access key id", credentials.access_key), ("token", credentials.token)):
        if value and not _SENDABLE.fullmatch(value):
            raise CredentialsError(
                f"the S3 credentials' {what} holds a character no request can carry (a "
                f"space, a line end or another control character). {CREDENTIALS_HELP}"
            )


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def _canonical_query(query: str) -> str:
    """The query's pairs (as sent: quoted already) sorted by name, then value;
    a name without a value ("uploads") as ``name=``."""
    if not query:
        return ""
    pairs = sorted(pair.partition("=")[::2] for pair in query.split("&"))
    return "&".join(f"{k}={v}" for k, v in pairs)
