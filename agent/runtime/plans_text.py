"""``rackplan plans``' text output: the JSON documents of ``--json`` as an operator reads them.

Each function takes the document the command prints with ``--json`` and nothing else, so the
text can never say what the document does not.
"""

from __future__ import annotations

from typing import Any

#: at most this many partitions listed per section of ``explain`` and ``diff`` (the JSON has them all)
SHOWN = 20


def printable(line: str) -> str:
    """``line`` with every character a terminal acts on (control characters, a newline among them, and the
    other non-printing ones) escaped as Python writes it (``\\x1b``): keys, reasons and member ids come from
    the topics, which any writer with access fills, and an escape sequence retitles or clears a terminal."""
    if line.isprintable():
        return line
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in line)


def text(lines: list[str]) -> str:
    """The lines of an answer, each :func:`printable`, one per line."""
    return "".join(printable(line) + "\n" for line in lines)


def _tps(items: list[Any]) -> str:
    names = [f"{t}-{p}" for t, p in items[:SHOWN]]
    more = f" (+{len(items) - SHOWN} more)" if len(items) > SHOWN else ""
    return ", ".join(names) + more


def _refused(doc: dict[str, Any]) -> list[str]:
    return [
        f"  refused: partition {s['partition']} offset {s['offset']}: {s['reason']}: {s['detail']}"
        for s in doc["refused"]
    ]


def plan_line(k: dict[str, Any]) -> str:
    """One key of ``plans list``."""
    plan = k["plan"]
    if plan is None:
        return f"{k['key']}: {k['status'].replace('_', ' ')}"
    after = plan["locality"]["after"]
    epoch = "" if plan["epoch"] is None else f", epoch {plan['epoch']}"
    return (
        f"{k['key']}: generation {plan['generation']}{epoch}, {plan['created_at']}, "
        f"cross-rack {after['cross_rack']} of {after['total']} ({plan['reason']})"
    )


def render_list(doc: dict[str, Any]) -> str:
    lines = [f"plan topic {doc['topic']}: {doc['records']} records, {len(doc['keys'])} keys"]
    if not doc["authenticated"]:
        lines.append("  records unauthenticated: no registrations.secret_file set, MACs not checked")
    for k in doc["keys"]:
        lines.append(plan_line(k))
        lines += _refused(k)
    lines += [
        f"refused: partition {s['partition']} offset {s['offset']}: {s['reason']}: {s['detail']}"
        for s in doc["refused_without_key"]
    ]
    return text(lines)


def render_show(k: dict[str, Any]) -> str:
    lines = [f"{k['key']}: {k['status'].replace('_', ' ')}"]
    rec = k["record"]
    if rec is not None:
        lines.append(
            f"  record: partition {rec['partition']} offset {rec['offset']}, written {rec['written_at']}"
        )
    plan = k["plan"]
    if plan is not None:
        before, after = plan["locality"]["before"], plan["locality"]["after"]
        change = (
            f"{after['cross_rack']}" if before is None else f"{before['cross_rack']} -> {after['cross_rack']}"
        )
        lines += [
            f"  generation {plan['generation']} ({plan['state']}), epoch {plan['epoch']}, agent {plan['agent_id']}",
            f"  created {plan['created_at']}: {plan['reason']}",
            f"  cross-rack partitions {change} of {after['total']} ({plan['fetch_mode']}), moved {plan['moved']}",
            "  stats: " + ", ".join(f"{name} {value}" for name, value in sorted(plan["stats"].items())),
        ]
        for member, parts in sorted(plan["assignment"].items()):
            count = len(parts) if isinstance(parts, list) else len(parts.get("active") or [])
            lines.append(f"  member {member}: {count}")
    lines += [f"  stale: partition {s['partition']} offset {s['offset']}: {s['detail']}" for s in k["stale"]]
    lines += _refused(k)
    lines.append("ok" if k["ok"] else "problem: " + _show_problem(k))
    return text(lines)


def _show_problem(k: dict[str, Any]) -> str:
    if k["refused"]:
        return f"{len(k['refused'])} record(s) refused under this key (not the agent's, or malformed)"
    return "no plan of record: followers of this group act on no plan"


def render_explain(doc: dict[str, Any]) -> str:
    c = doc["counts"]
    racks = ", ".join(doc["member_racks"]) or "none known"
    roles = c.get("by_role")  # a Streams app: (task, topic partition) pairs, per role
    who = "client" if roles is not None else "member"
    lines = [
        f"{doc['key']} generation {doc['generation']} ({doc['fetch_mode']}), {who} racks: {racks}",
        f"  {c['partitions']} {'(task, partition) pairs' if roles is not None else 'partitions'}: "
        f"{c['local']} local, {c['cross_rack']} cross-rack, "
        f"{c['member_rack_unknown']} of {who}s of unknown rack, "
        f"{c['partition_rack_unknown']} on brokers without a rack, {c['missing']} not in the metadata",
    ]
    if roles:
        lines.append(
            "  cross-rack by role: "
            + ", ".join(f"{role} {n['cross_rack']} of {n['pairs']}" for role, n in roles.items())
        )
    for v in doc["cross_rack"][:SHOWN]:
        where = (
            f"its leader is in {v['leader_rack']}"
            if v["why"] == "leader_in_other_rack"
            else f"replicas in {', '.join(v['replica_racks'])}"
        )
        task = f" ({v['role']} {v['task']})" if v.get("role") else ""
        lines.append(
            f"  cross-rack {v['topic']}-{v['partition']}{task}: {who} {v['member']} in {v['member_rack']}, {where}"
        )
    if len(doc["cross_rack"]) > SHOWN:
        lines.append(f"  (+{len(doc['cross_rack']) - SHOWN} more cross-rack)")
    unknown = sorted({v["member"] for v in doc["member_rack_unknown"]})
    if unknown:
        lines.append(
            f"  rack unknown (no registration or rack_mapping rule places them): {', '.join(unknown)}"
        )
    if doc["missing"]:
        lines.append(f"  not in the metadata: {_tps([[v['topic'], v['partition']] for v in doc['missing']])}")
    fix = doc["unfixable"]
    lines.append(
        f"  no assignment can fix {len(fix)}: no replica in any {who} rack"
        + (f": {_tps([[u['topic'], u['partition']] for u in fix])}" if fix else "")
    )
    lines += [f"  note: {n}" for n in doc["notes"]]
    return text(lines)


def render_diff(doc: dict[str, Any]) -> str:
    cr = doc["cross_rack"]
    lines = [
        f"{doc['key']} generation {doc['generation']} against the live group (state {doc['state']})",
        f"  cross-rack partitions: planned {cr['planned']}, live {cr['live']}"
        f" (live of unknown rack: {cr['live_counts']['member_rack_unknown']})",
    ]
    for m in doc["members"]:
        if m["same"]:
            continue
        who = m["member"] if m["member"] is not None else f"(not in the plan) {m['live_member']}"
        if m["live_member"] is None:
            lines.append(f"  member {who}: planned {m['planned']}, not in the live group")
            continue
        lines.append(
            f"  member {who}: planned {m['planned']}, holds {m['live']}"
            + (f"; lacks {_tps(m['missing'])}" if m["missing"] else "")
            + (f"; beyond its plan {_tps(m['extra'])}" if m["extra"] else "")
        )
    if doc["unowned"]:
        lines.append(f"  owned by nobody: {_tps(doc['unowned'])}")
    for w in doc["wrong_member"][:SHOWN]:
        lines.append(
            f"  {w['topic']}-{w['partition']}: planned for {w['planned']}, held by {', '.join(w['held_by'])}"
        )
    for w in doc["owned_twice"][:SHOWN]:
        lines.append(f"  {w['topic']}-{w['partition']}: owned twice, by {', '.join(w['held_by'])}")
    for w in doc["unplanned"][:SHOWN]:
        lines.append(
            f"  {w['topic']}-{w['partition']}: held by {', '.join(w['held_by'])}, planned for nobody"
        )
    lines += [f"  note: {n}" for n in doc["notes"]]
    lines.append(
        "in step with the plan" if doc["in_step"] else f"differs: {len(doc['members_differ'])} member(s)"
    )
    return text(lines)
