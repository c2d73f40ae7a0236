"""Text that may carry a credential, made fit for messages and logs.

A URL typed where an endpoint or a destination belongs may carry a key and
secret as its userinfo (``http://KEY:SECRET@host``), in any shape: a bad port,
another scheme or none, a secret holding '/' or '@', the '@' percent-encoded.
Whatever puts such a URL into text (an error saying what is wrong with it, a
log line saying where a request went) shows it through :func:`shown_url`;
text made elsewhere that may quote one (a botocore or Airflow error) passes
through :func:`redact`.
"""

from __future__ import annotations

import re

# Characters of a URL shown in a message; the rest is cut, with '...'.
SHOWN_CHARS = 200
MASK = "***"
# Where userinfo ends: the last '@' of the URL, or its percent-encoded form.
# AWS secret keys hold '/' and '+', so no URL parser finds the end reliably.
_AT = re.compile(r"@|%40", re.IGNORECASE)
# In free text: a run of non-blank, unquoted characters up to its last '@',
# after an optional scheme.
_USERINFO = re.compile(
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)?[^\s'\"<>`]*(?:@|%40)", re.IGNORECASE
)


def has_userinfo(url: str) -> bool:
    """Whether ``url`` may carry a credential: an '@' anywhere, plain or encoded."""
    return _AT.search(url) is not None


def shown_url(url: object) -> str:
    """``url`` for a message: all before its last '@' replaced (a credential
    typed into a URL never reaches a log), its query or fragment replaced too
    (presigned URLs carry signatures there), and cut to :data:`SHOWN_CHARS`."""
    text = str(url)
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "", text
    ends = list(_AT.finditer(rest))
    if ends:
        rest = f"{MASK}@{rest[ends[-1].end() :]}"
    for mark in "?#":
        head, found, _ = rest.partition(mark)
        if found:
            rest = f"{head}{mark}{MASK}"
    shown = f"{scheme}{sep}{rest}"
    return shown if len(shown) <= SHOWN_CHARS else shown[:SHOWN_CHARS] + "..."


def redact(text: str) -> str:
    """``text`` with the userinfo of every URL-like word in it replaced: for
    messages from other libraries, which quote an endpoint as it was given."""
    return _USERINFO.sub(lambda m: f"{m.group('scheme') or ''}{MASK}@", text)
