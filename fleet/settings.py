"""Settings of the fleet job: where Spark runs and what is compared.

Same rules as the agent's settings (YAML file, every key overridable by
environment, ``RACKPLAN_`` prefix, ``__`` between levels, environment wins),
in a file of their own: ``RACKPLAN_SPARK__MASTER=spark://head:7077``,
``RACKPLAN_SPARK__EXECUTOR_MEMORY=4g``, ``RACKPLAN_FLEET__PRICE_PER_GB=0.01``.
Unknown ``RACKPLAN_`` variables (the agent's) are ignored here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_settings import SettingsConfigDict

from rackplan.agent.settings.environment import EnvFirstSettings
from rackplan.agent.settings.errors import SettingsError, describe_error
from rackplan.agent.settings.yaml_file import read_yaml_mapping
from rackplan.assignor.model import CONSUMER_ASSIGNORS, RACK_STRATEGIES

from .figures import DEFAULT_PRICE_PER_GB
from .labels import CONSUMER_LABELS


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SparkSettings(_Section):
    #: ``local[*]``: every core of this machine, nothing to install but the package
    master: str = "local[*]"
    app_name: str = "rackplan-fleet"
    executor_instances: int | None = Field(default=None, ge=1)
    executor_cores: int | None = Field(default=None, ge=1)
    executor_memory: str | None = None
    driver_memory: str | None = None
    #: partitions of the unit stage; 0: sized from the unit count (a multiple of the cores, at most eight
    #: waves, about 400 units per core and wave); also the small tables' shuffle partitions (0: 8)
    partitions: int = Field(default=0, ge=0)
    #: rows per Arrow batch handed to Python: group rows hold a slice of a cluster, keep batches small
    arrow_batch_rows: int = Field(default=64, ge=1)
    #: the Spark web UI (off by default: a batch job needs no open port)
    ui: bool = False
    #: options of the JVMs Spark starts (the driver when the job starts it, the executors): by default
    #: the client compiler only (``TieredStopAtLevel=1``), since the job's JVM work is too short for the
    #: server compiler (C2) to pay back its compile time (docs/performance.md, fleet); "" for the JVM's own
    jvm_options: str = "-XX:TieredStopAtLevel=1"
    #: a file for the driver JVM's classes (the JDK's application class-data sharing): written when the
    #: first run ends, mapped by the next ones instead of loading the classes from Spark's jars again;
    #: "" (the default): none.  Only where the job starts the driver JVM (local mode, not spark-submit)
    class_archive: str = ""
    #: Spark SQL's code generation (Janino-compiled Java per query stage); off by default: the JVM side
    #: carries figures, a few hundred bytes a unit, so compiling costs more CPU than it saves
    codegen: bool = False
    #: any other Spark property, passed through
    conf: dict[str, str] = Field(default_factory=dict)


class FleetOptions(_Section):
    #: USD per GB (10^9 bytes) crossing zones; AWS bills 0.01 each way
    price_per_gb: float = Field(default=DEFAULT_PRICE_PER_GB, ge=0, allow_inf_nan=False)
    #: consumer groups are compared across these (``rack-optimal+bytes``: rack-optimal with
    #: ``objective: bytes``, opt-in: it needs the snapshots' traffic)
    consumer_assignors: tuple[str, ...] = CONSUMER_ASSIGNORS
    #: Streams apps are compared across these ``rack_aware.strategy`` values
    streams_strategies: tuple[str, ...] = RACK_STRATEGIES
    #: ``latest``: the newest snapshot of each cluster; ``all``: every snapshot (history)
    history: Literal["latest", "all"] = "latest"
    #: seconds between progress lines on stderr; 0: none; at most a day (a finite wait)
    progress_interval_s: float = Field(default=10.0, ge=0, le=86_400, allow_inf_nan=False)
    #: keep every unit's instance and plan in the locality table (to replay with ``rackplan assign``)
    keep_plans: bool = False
    #: ``local``: in this process, without Spark (rackplan.fleet.local); ``spark``: the Spark job;
    #: ``auto``: local when every path is local and the run has at most ``local_max_units`` units
    engine: Literal["auto", "local", "spark"] = "auto"
    #: the crossover of ``auto``: above this many units Spark is about as fast or faster on 2 cores
    #: (measured: docs/performance.md, fleet); more cores bring it down
    local_max_units: int = Field(default=130_000, ge=0)
    #: each unit's ``elapsed_ms`` (time in ``rackplan assign``); off: null, and the tables are then a
    #: function of the input alone (the same bytes on every run and either engine)
    unit_timings: bool = True

    @field_validator("consumer_assignors")
    @classmethod
    def _known_assignors(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [a for a in v if a not in CONSUMER_LABELS]
        if unknown or not v:
            raise ValueError(f"expected some of {', '.join(CONSUMER_LABELS)}, got {list(v)}")
        return v

    @field_validator("streams_strategies")
    @classmethod
    def _known_strategies(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [a for a in v if a not in RACK_STRATEGIES]
        if unknown or not v:
            raise ValueError(f"expected some of {', '.join(RACK_STRATEGIES)}, got {list(v)}")
        return v


class FleetSettings(EnvFirstSettings):
    model_config = SettingsConfigDict(
        env_prefix="RACKPLAN_", env_nested_delimiter="__", extra="ignore", frozen=True, case_sensitive=False
    )

    spark: SparkSettings = Field(default_factory=SparkSettings)
    fleet: FleetOptions = Field(default_factory=FleetOptions)

    @classmethod
    def load(cls, path: str | Path | None = None, **overrides: Any) -> FleetSettings:
        """Settings from an optional YAML file (keys ``spark`` and ``fleet``), then the environment.

        ``overrides`` (``spark={...}``, ``fleet={...}``: command-line flags) win over both.  Raises
        :class:`SettingsError`: one line naming where the bad value came from (the file, ``settings``
        for the environment, whose variable is named too, or ``command line``) and each bad key.
        """
        data: dict[str, Any] = {}
        if path is not None:
            loaded = read_yaml_mapping(path)
            unknown = sorted(set(loaded) - {"spark", "fleet"})
            if unknown:
                raise SettingsError(
                    f"{path}: unknown keys {', '.join(map(str, unknown))} (expected spark, fleet)"
                )
            data = loaded
        try:
            base = cls(**data)
        except ValidationError as e:
            raise SettingsError(f"{path or 'settings'}: {describe_error(e, cls)}") from None
        if not overrides:
            return base
        merged = base.model_dump()
        for section, values in overrides.items():
            merged[section] = {**merged[section], **{k: v for k, v in values.items() if v is not None}}
        try:
            return cls.model_validate(merged)
        except ValidationError as e:  # the file and the environment were valid: a flag is not
            raise SettingsError(f"command line: {describe_error(e, cls)}") from None
