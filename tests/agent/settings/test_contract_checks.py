"""Settings entries are checked against the contract's own key sets (assignor/contract.py owns them)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from rackplan.agent.settings.sections import Settings


def _group(**extra: Any) -> dict[str, Any]:
    return {
        "group_id": "payments",
        "assignor": "rack-optimal",
        "members": [{"member_id": "m-1", "rack": "az-a", "topics": ["orders"]}],
        **extra,
    }


def _app(rack_aware: dict[str, Any]) -> dict[str, Any]:
    return {
        "application_id": "clicks",
        "subtopologies": [
            {"id": "0", "source_topics": ["clicks"], "changelog_topics": [], "stateful": False}
        ],
        "clients": [{"process_id": "p-1", "rack": "az-a"}],
        "rack_aware": rack_aware,
    }


def test_the_contracts_traffic_keys_are_accepted_in_settings() -> None:
    # docs/CONTRACT.md: each consumer_groups entry is a `consumer_group` object of the contract, and the
    # contract gained objective, balance, balance_floor and rack_aware.weigh_by_traffic ("Traffic").
    # The agent refused them as unknown keys before its key sets came from the parser.
    s = Settings.model_validate(
        {
            "consumer_groups": [_group(objective="bytes", balance="bytes", balance_floor=5)],
            "streams_apps": [_app({"strategy": "min_traffic", "weigh_by_traffic": True})],
        }
    )
    assert s.consumer_groups[0]["objective"] == "bytes"
    assert s.streams_apps[0]["rack_aware"]["weigh_by_traffic"] is True


@pytest.mark.parametrize(
    ("doc", "where"),
    [
        ({"consumer_groups": [_group(objectiv="bytes")]}, "consumer_groups[0].objectiv"),
        ({"streams_apps": [_app({"weigh_by_trafic": True})]}, "streams_apps[0].rack_aware.weigh_by_trafic"),
        # A Streams app's path (issue 27 §4): classic (KIP-924, the agent's plans) or streams (KIP-1071).
        ({"streams_apps": [{**_app({}), "group_protocol": "stream"}]}, "streams_apps[0].group_protocol"),
        # The contract's rules still hold: a bytes objective needs rack-optimal.
        ({"consumer_groups": [_group(assignor="range", objective="bytes")]}, "objective"),
    ],
)
def test_a_typo_or_a_value_the_contract_refuses_is_named(doc: dict[str, Any], where: str) -> None:
    with pytest.raises(ValidationError) as e:
        Settings.model_validate(doc)
    assert where in str(e.value).replace("\n  ", "."), str(e.value)
