"""Registrations read once outside the loop (``rackplan snapshot``, ``rackplan plans``): the agent's rules."""

from __future__ import annotations

import json
from pathlib import Path

from rackplan.agent.groups.registered import merged_registrations
from rackplan.agent.kafka.tail import RawRecord
from rackplan.agent.protocol.registrations import consumer_registration
from rackplan.agent.settings.sections import Settings

NOW_MS = 1_800_000_000_000


def rec(offset: int, group: str, member: str, ts: int = NOW_MS, secret: bytes | None = None) -> RawRecord:
    key, value = consumer_registration(
        group, member, rack="az-a", topics=["orders"], timestamp_ms=ts, secret=secret
    )
    return RawRecord(0, offset, key.encode(), value, ts, "_rackplan.registrations")


def settings(tmp_path: Path, secret: bool = False) -> Settings:
    doc: dict[str, object] = {
        "consumer_groups": [
            {"group_id": "pay", "members": [{"member_id": "p-1", "rack": "az-b", "topics": ["t"]}]}
        ],
        "registrations": {"ttl_s": 60},
    }
    if secret:
        (tmp_path / "s").write_bytes(b"k")
        doc["registrations"] = {"ttl_s": 60, "secret_file": str(tmp_path / "s")}
    return Settings.model_validate(json.loads(json.dumps(doc)))


def test_the_file_and_the_topic_merge_as_the_agent_merges_them(tmp_path: Path) -> None:
    raw = [
        rec(0, "orders-app", "o-1"),
        rec(1, "orders-app", "o-2", ts=NOW_MS - 120_000),  # older than the TTL: expired
        rec(2, "pay", "intruder"),  # a member the settings file does not list: refused
        RawRecord(0, 3, b"consumer/orders-app/o-3", b"{not json", NOW_MS, "_rackplan.registrations"),
    ]
    merged = merged_registrations(settings(tmp_path), raw, NOW_MS)
    by = {r.key: r for r in merged.registrations}
    assert sorted(by) == ["consumer/orders-app", "consumer/pay"]
    assert by["consumer/orders-app"].source == "topic"
    assert [m["member_id"] for m in by["consumer/orders-app"].spec["members"]] == ["o-1"]
    assert [m["member_id"] for m in by["consumer/pay"].spec["members"]] == ["p-1"]


def test_with_a_secret_only_signed_registrations_count(tmp_path: Path) -> None:
    raw = [rec(0, "signed", "s-1", secret=b"k"), rec(1, "unsigned", "u-1")]
    keys = [r.key for r in merged_registrations(settings(tmp_path, secret=True), raw, NOW_MS).registrations]
    assert keys == ["consumer/pay", "consumer/signed"]
