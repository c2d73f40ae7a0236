"""What every command gets: parsed options, the output, and one S3 connection."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from zero_rename.cli.exits import NotFound, missing_bucket
from zero_rename.cli.output import Output
from zero_rename.core import (
    AUTO_PROFILE,
    Committer,
    Destination,
    S3Store,
    StoreConfig,
    check_endpoint,
    check_environment_endpoint,
    declared_profile,
    shown_url,
)
from zero_rename.errors import DestinationError

# Worker threads for many small requests (aborts, listings). S3 takes far
# more in parallel; the bound keeps a laptop's connection pool sane.
DEFAULT_THREADS = 32


def connect(config: StoreConfig) -> S3Store:
    """One boto3 client for the command (building one loads botocore's models: ~0.5 s)."""
    return S3Store.connect(config)


@dataclass
class Context:
    args: argparse.Namespace
    out: Output
    config: StoreConfig
    _store: S3Store | None = field(default=None, repr=False)

    @classmethod
    def from_args(cls, args: argparse.Namespace, out: Output) -> Context:
        # Credentials are never options: boto3's chain (environment, profile,
        # instance role) supplies them, so they appear in no argv or log.
        endpoint = getattr(args, "endpoint_url", None)
        if endpoint is not None:
            check_endpoint(endpoint, "--endpoint-url")
        config = StoreConfig(
            endpoint_url=endpoint or check_environment_endpoint(),
            region=getattr(args, "region", None),
            max_pool_connections=DEFAULT_THREADS * 2,
            profile=getattr(args, "store_profile", None) or AUTO_PROFILE,
        )
        return cls(args=args, out=out, config=config)

    @property
    def endpoint(self) -> str:
        """The endpoint for messages: masked, though a URL with credentials was refused."""
        return shown_url(self.config.endpoint_url) if self.config.endpoint_url else "AWS S3"

    @property
    def verbose(self) -> int:
        return int(getattr(self.args, "verbose", 0) or 0)

    def store(self) -> S3Store:
        """The command's store; with a named ``--store-profile`` it behaves as that
        store family needs (MinIO: uploads listed without a prefix; Ceph: If-Match
        unquoted), whoever builds it."""
        if self._store is None:
            self._store = connect(self.config).with_profile(declared_profile(self.config.profile))
        return self._store

    def destination(self, url: str) -> Destination:
        """Parse DEST and check that its bucket exists. Raises ConfigError or NotFound."""
        dest = Destination.parse(url)
        self.require_bucket(dest.bucket)
        return dest

    def committer(self, url: str) -> Committer:
        return Committer(self.destination(url), store=self.store(), profile=self.config.profile)

    def require_bucket(self, bucket: str) -> None:
        try:
            self.store().check_bucket(bucket)
        except DestinationError as exc:
            if missing_bucket(exc):
                raise NotFound(f"bucket {bucket!r} does not exist at {self.endpoint}") from exc
            raise
