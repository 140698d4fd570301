"""The environment as a settings source: ``RACKPLAN_`` variables win over the file, and a misspelt one is named.

Shared by the agent's and the fleet job's settings so both follow one rule.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

ENV_PREFIX = "RACKPLAN_"


#: ``RACKPLAN_`` variables that are not agent settings: the command's own, the fleet job's sections, tests'
OTHER_ENV_VARIABLES = frozenset({"config", "debug", "agent_supervised", "it_target", "oracle_examples"})


OTHER_ENV_SECTIONS = frozenset({"spark", "fleet"})


def unknown_env_variables(fields: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> list[str]:
    """``RACKPLAN_*`` variables that name no setting (``RACKPLAN_POLL_INTERVALL_S``), sorted.

    pydantic-settings reads only the variables it expects, so a misspelt top-level one would be
    ignored silently; nested typos (``RACKPLAN_HTTP__PORTT``) are already refused by the models.
    """
    env = os.environ if environ is None else environ
    out = []
    for name in env:
        if not name.upper().startswith(ENV_PREFIX):
            continue
        rest = name[len(ENV_PREFIX) :].lower()
        head = rest.split("__", 1)[0]
        if head in fields or rest in OTHER_ENV_VARIABLES or head in OTHER_ENV_SECTIONS:
            continue
        out.append(name)
    return sorted(out)


class EnvFirstSettings(BaseSettings):
    """Settings from a file's values (passed as init arguments) and the environment, which wins.

    Shared by the agent's and the fleet job's settings so both follow one rule.
    """

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return env_settings, init_settings  # first wins
