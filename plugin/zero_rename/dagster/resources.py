"""``ZeroRenameResource``: how Dagster ops reach a destination's S3 store.

Credentials come from boto3's standard chain (environment, profile, instance
role), or from the resource's own fields, which take Dagster's ``EnvVar`` as
``dagster_aws.s3.S3Resource`` does; :meth:`ZeroRenameResource.from_s3_resource`
takes them from an ``S3Resource`` the project already configures. Credentials
are used to build the client and never logged, returned or put in metadata.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from dagster import ConfigurableResource
from pydantic import Field

from zero_rename.core import (
    AUTO_PROFILE,
    Committer,
    S3Store,
    StoreConfig,
    botocore_session,
    declared_profile,
    make_client,
)

if TYPE_CHECKING:
    from dagster_aws.s3 import S3Resource

# The store's settings, as the resource takes them and the component's defs.yaml
# (``StoreSettings``): one description each, whichever a user reads.
EndpointUrl = Annotated[
    str | None, Field(description="S3 endpoint of an S3-compatible store; none for AWS")
]
RegionName = Annotated[str | None, Field(description="S3 region; boto3's by default")]
PathStyle = Annotated[
    bool | None, Field(description="path-style addressing; on by default with an endpoint")
]
StoreProfileName = Annotated[
    str,
    Field(
        description="the store's family (aws, minio, ceph, r2, gcs, seaweedfs) "
        "or auto: probe it at job setup"
    ),
]
ProfileName = Annotated[str | None, Field(description="AWS profile for credentials")]


class ZeroRenameResource(ConfigurableResource):
    """The S3 store of zero-rename destinations, and committers over it."""

    endpoint_url: EndpointUrl = None
    region_name: RegionName = None
    path_style: PathStyle = None
    store_profile: StoreProfileName = AUTO_PROFILE
    max_pool_connections: int = Field(
        default=64, description="HTTP connections to S3; at least the job's threads option"
    )
    profile_name: ProfileName = None
    aws_access_key_id: str | None = Field(default=None, description="else boto3's chain")
    aws_secret_access_key: str | None = Field(default=None, description="else boto3's chain")
    aws_session_token: str | None = Field(default=None, description="else boto3's chain")

    @classmethod
    def from_s3_resource(cls, s3: S3Resource, **overrides: Any) -> ZeroRenameResource:
        """The store and credentials of a ``dagster_aws.s3.S3Resource``."""
        fields = (
            "endpoint_url",
            "region_name",
            "profile_name",
            "aws_access_key_id",
            "aws_secret_access_key",
            "aws_session_token",
        )
        taken = {f: getattr(s3, f) for f in fields if getattr(s3, f, None) is not None}
        return cls(**{**taken, **overrides})

    def store_config(self) -> StoreConfig:
        return StoreConfig(
            endpoint_url=self.endpoint_url,
            region=self.region_name,
            max_pool_connections=self.max_pool_connections,
            path_style=self.path_style,
            profile=self.store_profile,
        )

    def store(self) -> S3Store:
        config = self.store_config()
        if not (self.profile_name or self.aws_access_key_id):
            return S3Store.connect(config)  # boto3's chain, as every other process uses
        session = botocore_session()
        if self.profile_name:
            session.set_config_variable("profile", self.profile_name)
        if self.aws_access_key_id:
            session.set_credentials(
                self.aws_access_key_id, self.aws_secret_access_key, self.aws_session_token
            )
        # A client of its own credentials: every request of the commit goes through it.
        return S3Store(make_client(config, session), profile=declared_profile(config.profile))

    def committer(self, destination: str) -> Committer:
        return Committer(destination, store=self.store(), profile=self.store_profile)

    def spark_options(self) -> dict[str, str]:
        """The writer options that point Spark's executors at this store (never credentials)."""
        options = {"store_profile": self.store_profile}
        if self.endpoint_url:
            options["endpoint"] = self.endpoint_url
        if self.region_name:
            options["region"] = self.region_name
        if self.path_style is not None:
            options["path_style"] = str(self.path_style).lower()
        return options
