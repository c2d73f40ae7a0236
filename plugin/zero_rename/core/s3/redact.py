"""Text that may carry a credential, made fit for messages and logs.

A URL typed where an endpoint or a destination belongs may carry a key and
secret as its userinfo (``http://KEY:SECRET@host``), in any shape: a bad port,
another scheme or none, a secret holding '/' or '@', the '@' percent-encoded.
Whatever puts such a URL into text (an error saying what is wrong with it, a
log line saying where a request went) shows it through :func:`shown_url`;
text made elsewhere that may quote one (a botocore or Airflow error) passes
through :func:`redact`.

Every function here takes time linear in its input, whatever the input: text
to mask comes from anyone (a destination typed on a command line or into a
page's address), and a pattern that rescans a word from each of its
characters took minutes on 100,000 of them, holding the interpreter all along.
"""

from __future__ import annotations

import re

# Characters of a URL shown in a message; the rest is cut, with '...'.
SHOWN_CHARS = 200
MASK = "***"
# Where userinfo ends: the last '@' of the URL, or its percent-encoded form.
# AWS secret keys hold '/' and '+', so no URL parser finds the end reliably.
_AT = re.compile(r"@|%40", re.IGNORECASE)
# In free text, a word: a run of non-blank, unquoted characters. Its userinfo
# is all of it up to its last '@' (plain or encoded), after an optional scheme.
_WORD = re.compile(r"[^\s'\"<>`]+")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://")


def has_userinfo(url: str) -> bool:
    """Whether ``url`` may carry a credential: an '@' anywhere, plain or encoded."""
    return _AT.search(url) is not None


def userinfo_end(text: str) -> int:
    """Where the userinfo of ``text`` ends: just after its last '@' or '%40'; 0
    when it has none. Two searches from the end, so linear."""
    at = text.rfind("@")
    encoded = text.rfind("%40")
    if at < 0 and encoded < 0:
        return 0
    return at + 1 if at > encoded else encoded + 3


def shown_url(url: object) -> str:
    """``url`` for a message: all before its last '@' replaced (a credential
    typed into a URL never reaches a log), its query or fragment replaced too
    (presigned URLs carry signatures there), and cut to :data:`SHOWN_CHARS`."""
    text = str(url)
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "", text
    end = userinfo_end(rest)
    if end:
        rest = f"{MASK}@{rest[end:]}"
    for mark in "?#":
        head, found, _ = rest.partition(mark)
        if found:
            rest = f"{head}{mark}{MASK}"
    shown = f"{scheme}{sep}{rest}"
    return shown if len(shown) <= SHOWN_CHARS else shown[:SHOWN_CHARS] + "..."


def redact(text: str) -> str:
    """``text`` with the userinfo of every URL-like word in it replaced: for
    messages from other libraries, which quote an endpoint as it was given.

    A word holding an '@' (or '%40') keeps its scheme and what follows its last
    one: ``http://KEY:SECRET@host/x`` becomes ``http://***@host/x``. Each word
    is searched once, from its end: linear in the text."""
    pieces: list[str] = []
    done = 0
    for word in _WORD.finditer(text):
        end = userinfo_end(word.group())
        if not end:
            continue
        scheme = _SCHEME.match(word.group())
        pieces += [text[done : word.start()], scheme.group() if scheme else "", f"{MASK}@"]
        done = word.start() + end
    if not pieces:
        return text
    pieces.append(text[done:])
    return "".join(pieces)


# A setting whose name says it holds a secret, as command lines and error texts
# quote one (``--conf spark.hadoop.fs.s3a.secret.key=...``, ``password: ...``,
# ``X-Amz-Signature=...``): its value is masked. AWS access key ids are masked
# wherever they stand. Applied to bounded text only (:func:`error_line`).
# The pattern starts at the secret's word and never backtracks (possessive
# quantifiers), so a long word costs one look at each character.
_SECRET_SETTING = re.compile(
    r"(?i)((?:secret|password|passwd|token|signature|credential)[\w.\-]*+"
    r"[\"']?\s*+[=:]\s*+[\"']?)[^\s\"',;&]++"
)
_ACCESS_KEY_ID = re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")
# An error as a record keeps it: one line of at most this many characters.
ERROR_CHARS = 500


def redact_secrets(text: str) -> str:
    """``text`` with every URL's userinfo (:func:`redact`), every secret-named
    setting's value and every AWS access key id replaced by ``***``."""
    text = _SECRET_SETTING.sub(lambda m: m.group(1) + MASK, redact(text))
    return _ACCESS_KEY_ID.sub(MASK, text)


def error_line(exc: BaseException | str, limit: int = ERROR_CHARS) -> str:
    """An error as one line for a record, a log or a page: its type and its first
    line that says something, blanks collapsed, secrets masked, at most ``limit``
    characters (``...`` where cut)."""
    text = exc if isinstance(exc, str) else str(exc)
    first = next((line for line in text.splitlines() if line.strip()), "")
    line = " ".join(first[: limit * 4].split())
    if not isinstance(exc, str):
        line = f"{type(exc).__name__}: {line}" if line else type(exc).__name__
    line = redact_secrets(line)
    return line if len(line) <= limit else line[: limit - 3] + "..."
