"""Which destinations the Commits page may show: what an Airflow admin configured.

The page reads S3 through one connection (``[zero_rename] aws_conn_id``),
whose credentials may reach far more than the tables its users should see
the job history of. So the page shows only:

- ``[zero_rename] destinations``: the destinations listed by default, and
- destinations at or under an entry of ``[zero_rename]
  allowed_destination_prefixes`` (``s3://bucket`` for a whole bucket,
  ``s3://bucket/warehouse`` for every table under ``warehouse/``).

Any other ``?dest=`` is refused (403) before S3 is asked anything. A prefix
matches whole path elements: ``s3://b/sales`` allows ``s3://b/sales/eu`` but
not ``s3://b/sales_secret``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from zero_rename.core import Destination
from zero_rename.errors import ConfigError

log = logging.getLogger(__name__)

SECTION = "zero_rename"
DESTINATIONS = "destinations"
PREFIXES = "allowed_destination_prefixes"


@dataclass(frozen=True)
class Prefix:
    """``s3://bucket[/path]``: the bucket, and the path without '/' at either end."""

    bucket: str
    path: str

    def holds(self, dest: Destination) -> bool:
        if dest.bucket != self.bucket:
            return False
        return not self.path or dest.prefix == self.path or dest.prefix.startswith(self.path + "/")


def parse_prefix(text: str) -> Prefix:
    """An entry of ``allowed_destination_prefixes``; a bucket alone is allowed here.

    Raises:
        ConfigError: for anything :meth:`Destination.parse` refuses but a bucket root.
    """
    scheme, sep, rest = text.strip().partition("://")
    if sep and "/" not in rest.strip("/"):
        # A whole bucket: parsed as a table in it, so the bucket name is checked.
        bucket = Destination.parse(f"{scheme}://{rest.strip('/')}/t").bucket
        return Prefix(bucket, "")
    dest = Destination.parse(text)
    return Prefix(dest.bucket, dest.prefix)


def split_setting(text: str | None) -> list[str]:
    """A comma-separated setting, blanks dropped."""
    return [part.strip() for part in (text or "").split(",") if part.strip()]


@dataclass(frozen=True)
class Scope:
    """The destinations the page may show."""

    destinations: tuple[str, ...]  # as configured, in order
    prefixes: tuple[Prefix, ...]

    @classmethod
    def from_settings(cls, destinations: str | None, prefixes: str | None) -> Scope:
        """The two settings' text; an entry that does not parse is skipped with a
        warning in the api-server's log (a listed destination still shows its error)."""
        parsed = []
        for entry in split_setting(prefixes):
            try:
                parsed.append(parse_prefix(entry))
            except ConfigError as exc:
                log.warning("[%s] %s: entry skipped: %s", SECTION, PREFIXES, exc)
        return cls(tuple(split_setting(destinations)), tuple(parsed))

    def allows(self, dest: Destination) -> bool:
        return dest.url in self._listed() or any(p.holds(dest) for p in self.prefixes)

    def _listed(self) -> set[str]:
        listed = set()
        for url in self.destinations:
            try:
                listed.add(Destination.parse(url).url)
            except ConfigError:
                pass  # shown with its error when the page lists the defaults
        return listed


# Characters of a refused destination the message repeats.
SHOWN_URL = 200


def refusal(dest: Destination) -> str:
    """The 403's message: what the page refused and which setting would allow it."""
    url = dest.url if len(dest.url) <= SHOWN_URL else dest.url[:SHOWN_URL] + "..."
    return (
        f"{url} is not one of the destinations this page shows. An Airflow admin "
        f"allows it by adding it to [{SECTION}] {DESTINATIONS}, or a prefix of it to "
        f"[{SECTION}] {PREFIXES}."
    )
