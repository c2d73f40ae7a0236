"""A Dagster component for the daily partitioned asset: a ``defs.yaml``, no Python.

    type: zero_rename.dagster.DailyPartitionedAssetComponent
    attributes:
      asset_key: daily_events
      destination: s3://warehouse/daily_events
      start_date: "2024-01-01"
      frame: my_project.frames.daily_events     # (spark, day, **frame_options) -> DataFrame

builds the asset (one partition a day; materializing a day writes the frame
``frame`` returns for it through the ``zero-rename`` format and commits it with
:func:`~zero_rename.dagster.assets.commit_partition`), its two blocking checks
(:mod:`zero_rename.dagster.checks`), a job of the asset and its schedule.
``dg scaffold defs zero_rename.dagster.DailyPartitionedAssetComponent PATH``
writes such a file; ``dg list components`` lists the component (the package
registers ``zero_rename.dagster`` under the ``dagster_dg_cli.registry_modules``
entry point).

The store's connection is given by its settings, never its secrets:
credentials come from boto3's chain where the asset runs (the environment, a
profile, an instance role), as for every other process writing through the
format. Job options are checked when the definitions load, so a wrong
``conflict_mode`` or ``table_format`` fails ``dagster definitions validate``.
"""

# No postponed annotations here: Dagster reads the asset's config annotation when it
# decorates it.
import datetime
import importlib
import sys
import textwrap
from collections.abc import Callable, Iterator, Mapping
from typing import Annotated, Any, Literal

from dagster import (
    AssetCheckResult,
    AssetExecutionContext,
    AssetKey,
    AssetsDefinition,
    Backoff,
    ComponentLoadContext,
    Config,
    DailyPartitionsDefinition,
    DefaultScheduleStatus,
    Definitions,
    MaterializeResult,
    RetryPolicy,
    asset,
    build_schedule_from_partitioned_job,
    define_asset_job,
)
from dagster.components import (
    Component,
    Model,
    ResolutionContext,
    Resolvable,
    Resolver,
    Scaffolder,
    ScaffoldRequest,
    scaffold_with,
)
from pydantic import BaseModel, Field, field_validator

from zero_rename.core import AUTO_PROFILE, parse_options
from zero_rename.dagster import checks
from zero_rename.dagster.assets import commit_partition
from zero_rename.dagster.failures import protocol_errors
from zero_rename.dagster.resources import (
    EndpointUrl,
    PathStyle,
    ProfileName,
    RegionName,
    StoreProfileName,
    ZeroRenameResource,
)

# A frame: (spark, day, **frame_options) -> the day's DataFrame, partition column included.
Frame = Callable[..., Any]


def _resolve_frame(context: ResolutionContext, path: str) -> Frame:
    """``package.module.function``, imported when the definitions load."""
    module, _, name = context.resolve_value(path, as_type=str).rpartition(".")
    if not module:
        raise ValueError(f"frame {path!r} is not a dotted path (package.module.function)")
    found = getattr(importlib.import_module(module), name, None)
    if not callable(found):
        raise ValueError(f"frame {path!r} names nothing callable")
    return found


ResolvedFrame = Annotated[
    Frame,
    Resolver(
        _resolve_frame,
        model_field_type=str,
        description="package.module.function: (spark, day, **frame_options) -> the day's "
        "DataFrame, with its partition column",
    ),
]


class StoreSettings(Model, Resolvable):
    """Where the destination's S3 store is; credentials come from boto3's chain."""

    endpoint_url: EndpointUrl = None
    region_name: RegionName = None
    path_style: PathStyle = None
    store_profile: StoreProfileName = AUTO_PROFILE
    profile_name: ProfileName = None

    @field_validator("endpoint_url", "region_name", "profile_name")
    @classmethod
    def _unset_when_empty(cls, value: str | None) -> str | None:
        # "{{ env('NAME', '') }}" for a variable that is not set: the default applies.
        return value or None

    def resource(self) -> ZeroRenameResource:
        return ZeroRenameResource(**self.model_dump())


class ScheduleSettings(Model, Resolvable):
    """The daily schedule of the asset's job: each day's partition, once the day is over."""

    hour_of_day: int = Field(default=1, ge=0, le=23)
    minute_of_hour: int = Field(default=0, ge=0, le=59)
    running: bool = Field(default=False, description="start the schedule running")


class FrameConfig(Config):
    """A run's own frame options, over the component's."""

    frame_options: dict[str, Any] = Field(
        default_factory=dict, description="keyword arguments for the frame, over defs.yaml's"
    )


class ScaffoldParams(BaseModel):
    asset_key: str | None = None
    destination: str | None = None
    frame: str | None = None
    start_date: str | None = None


class DailyScaffolder(Scaffolder[ScaffoldParams]):
    """``dg scaffold defs``: a defs.yaml with the required attributes, to fill in."""

    @classmethod
    def get_scaffold_params(cls) -> type[ScaffoldParams]:
        return ScaffoldParams

    def scaffold(self, request: ScaffoldRequest[ScaffoldParams]) -> None:
        params = request.params or ScaffoldParams()
        name = params.asset_key or request.target_path.name
        request.target_path.mkdir(parents=True, exist_ok=True)
        (request.target_path / "defs.yaml").write_text(
            textwrap.dedent(f"""\
                type: {request.type_name}

                attributes:
                  asset_key: {name}
                  destination: {params.destination or f"s3://my-bucket/{name}"}
                  start_date: "{params.start_date or datetime.date.today().isoformat()}"
                  # (spark, day, **frame_options) -> the day's DataFrame, with column dt
                  frame: {params.frame or "my_project.frames.daily_frame"}
                  frame_options: {{}}
                  conflict_mode: replace
                  table_format: none
                  # The store's settings (none for AWS); credentials come from boto3's
                  # chain where the asset runs, never from this file.
                  store:
                    endpoint_url: "{{{{ env('AWS_ENDPOINT_URL_S3', '') }}}}"
                  schedule:
                    hour_of_day: 1
                """)
        )


@scaffold_with(DailyScaffolder)
class DailyPartitionedAssetComponent(Component, Model, Resolvable):
    """A daily partitioned asset written through zero-rename: all of a day or nothing,
    with blocking checks of its task manifests and of its committed files."""

    asset_key: str = Field(description="the asset's key (slash-separated for a path)")
    destination: str = Field(description="s3://bucket/prefix of the table")
    start_date: str = Field(description="the first day, YYYY-MM-DD")
    frame: ResolvedFrame
    frame_options: dict[str, Any] = Field(
        default_factory=dict, description="keyword arguments for the frame"
    )
    timezone: str = Field(default="UTC", description="the days' time zone")
    partition_column: str = Field(default="dt", description="the day's column in the frame")
    conflict_mode: Literal["replace", "append", "fail"] = Field(
        default="replace", description="replace: a re-run of a day leaves one copy of it"
    )
    on_conflict: Literal["wait", "fail"] = Field(
        default="wait", description="wait: two runs of one day are serialized"
    )
    table_format: str = Field(
        default="none", description="none, iceberg or delta: each day one commit of the table"
    )
    options: dict[str, str] = Field(
        default_factory=dict,
        description="more job options: iceberg_catalog, iceberg_table, threads, part_size...",
    )
    store: StoreSettings = Field(default_factory=StoreSettings)
    spark_config: dict[str, str] = Field(
        default_factory=dict, description="Spark settings (spark.master...) for the session"
    )
    retries: int = Field(default=2, ge=0, description="retries of a failed materialization")
    schedule: ScheduleSettings | None = Field(
        default_factory=ScheduleSettings, description="the daily schedule; null: none"
    )
    validate_output: bool = Field(
        default=True, description="the output check after the commit, as a blocking check"
    )
    row_counts: bool = Field(
        default=True, description="dagster/row_count and dagster/partition_row_count"
    )
    group_name: str | None = Field(default="zero_rename")

    def job_options(self) -> dict[str, str]:
        """The job options as given, checked here (a ConfigError names what is wrong)."""
        given = {
            **self.options,
            "partition_columns": self.partition_column,
            "conflict_mode": self.conflict_mode,
            "on_conflict": self.on_conflict,
            "table_format": self.table_format,
        }
        with protocol_errors():
            parse_options(given)
        return given

    def build_defs(self, context: ComponentLoadContext) -> Definitions:
        options = self.job_options()
        daily = self.build_asset(options)
        job = define_asset_job(f"{daily.key.to_python_identifier()}_job", selection=[daily])
        schedules = []
        if self.schedule is not None:
            schedules.append(
                build_schedule_from_partitioned_job(
                    job,
                    hour_of_day=self.schedule.hour_of_day,
                    minute_of_hour=self.schedule.minute_of_hour,
                    default_status=DefaultScheduleStatus.RUNNING
                    if self.schedule.running
                    else DefaultScheduleStatus.STOPPED,
                )
            )
        output = [checks.output_check(daily, self.destination, self.store.resource())]
        return Definitions(
            assets=[daily],
            asset_checks=output if self.validate_output else [],
            jobs=[job],
            schedules=schedules,
        )

    def build_asset(self, options: Mapping[str, str]) -> AssetsDefinition:
        key = AssetKey(self.asset_key.split("/"))
        kinds = {"spark", "s3"} | ({self.table_format} if self.table_format != "none" else set())

        @asset(
            key=key,
            partitions_def=DailyPartitionsDefinition(self.start_date, timezone=self.timezone),
            retry_policy=RetryPolicy(
                max_retries=self.retries, delay=10, backoff=Backoff.EXPONENTIAL
            ),
            group_name=self.group_name,
            kinds=kinds,
            check_specs=[checks.manifests_check_spec(key)],
            metadata={"dagster/uri": self.destination},
            description=f"One day of {self.destination} a partition, committed without "
            "renames: all of the day or nothing.",
        )
        def _daily(
            context: AssetExecutionContext, config: FrameConfig
        ) -> Iterator[MaterializeResult | AssetCheckResult]:
            day = context.partition_time_window.start.date()
            frame_options = {**self.frame_options, **config.frame_options}

            def write(writer: dict[str, str]) -> None:
                frame = self.frame(spark_session(self.spark_config), day, **frame_options)
                frame.write.format("zero-rename").options(**writer).mode("append").save(
                    self.destination
                )

            # A generator: Dagster reads no outputs from its annotation.
            yield from commit_partition(
                context, self.store.resource(), self.destination, options, write, self.row_counts
            )

        return _daily


def spark_session(config: Mapping[str, str]) -> Any:
    """The running Spark session, or one with ``config`` over these defaults: Python
    workers run this interpreter (which has the format), times in UTC."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    defaults = {
        "spark.app.name": "zero-rename-dagster",
        "spark.sql.session.timeZone": "UTC",
        "spark.pyspark.python": sys.executable,
    }
    for name, value in {**defaults, **config}.items():
        builder = builder.config(name, value)
    return builder.getOrCreate()
