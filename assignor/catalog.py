"""One line per assignor of the contract, for ``rackplan assign --help``: what to pick, not how it works.

docs/assignors.md says what each guarantees and how it is tested; docs/CONTRACT.md is the format.
tests/test_cli_help.py checks that every assignor the parser accepts has its line here and that the
defaults marked here are the parser's.
"""

from __future__ import annotations

from collections.abc import Mapping

#: consumer_group.assignor -> one line
CONSUMER: Mapping[str, str] = {
    "range": "Kafka's RangeAssignor, rack-aware as in KIP-881: Kafka's own plan; ignores owned",
    "cooperative-sticky": "Kafka's CooperativeStickyAssignor (KIP-429, KIP-881): balance, stickiness, racks",
    "rack-optimal": "fewest cross-rack partitions of any balanced plan, then fewest moves",
}
#: streams_app.assignor -> one line
STREAMS: Mapping[str, str] = {
    "high-availability": "Kafka Streams' HighAvailabilityTaskAssignor, rack-aware as in KIP-925",
    "sticky": "Kafka Streams' legacy StickyTaskAssignor, rack-aware as in KIP-925",
}
#: the assignor used when the field is absent
DEFAULTS: Mapping[str, str] = {"consumer_group": "cooperative-sticky", "streams_app": "high-availability"}


def assign_epilog() -> str:
    """The text after ``rackplan assign --help``'s options: the input in brief and the assignors."""
    lines = [
        "input: one JSON document with `cluster` (brokers and their racks, each topic's partitions as",
        "replica lists) and exactly one of `consumer_group` (members with racks and topics; optional",
        "owned partitions) or `streams_app` (clients, sub-topologies, lags). Output: the plan as JSON on",
        "stdout. Every field is in docs/CONTRACT.md; bad input exits 2 with one line naming the field.",
        "",
    ]
    for key, catalog in (("consumer_group", CONSUMER), ("streams_app", STREAMS)):
        lines.append(f"{key}.assignor:")
        width = max(map(len, catalog))
        for name, line in catalog.items():
            default = " (default)" if DEFAULTS[key] == name else ""
            lines.append(f"  {name:<{width}}  {line}{default}")
    lines += [
        "",
        "example: rackplan assign instance.json > plan.json   (or: rackplan assign - < instance.json)",
    ]
    return "\n".join(lines)
