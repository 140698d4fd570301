"""``rackplan check``'s text output: the findings document (:mod:`.check`) as an operator reads it."""

from __future__ import annotations

from typing import Any

from .plans_text import text


def render(doc: dict[str, Any]) -> str:
    """Brokers and racks, the agent's topics, each group and its would-be plan, then the problems."""
    lines = [f"brokers: {len(doc['brokers'])}, racks: {', '.join(doc['racks']) or 'none'}"]
    lines += [f"  broker {b['id']}: rack {b['rack'] or '(none)'}" for b in doc["brokers"]]
    sel = doc.get("replica_selector")
    if sel is not None:
        said = ", ".join(
            f"{b}: {v.get('replica_selector_class', v.get('error'))}" for b, v in sel["brokers"].items()
        )
        lines.append(f"replica selector ({sel['setting']}): {sel['state']} ({said})")
    lines.append("agent topics:")
    for t in doc["agent_topics"]:
        state = "exists" if t["exists"] else "missing (agent run creates it, or refuses to start without it)"
        lines.append(f"  {t['role']}: {t['name']}: {state}")
    lines.append(f"groups: {len(doc['groups'])}")
    for g in doc["groups"]:
        lines.append(f"  {g['key']} ({g['source'] or 'unusable'}): {group_line(g)}")
    publish = ", ".join(doc["would_publish"]) or "nothing"
    lines.append(f"would publish: {publish}")
    if doc["would_tombstone"]:
        lines.append(f"would tombstone: {', '.join(doc['would_tombstone'])}")
    lines += [alert_line(a) for a in doc["alerts"]]
    lines += [f"problem: {p}" for p in doc["problems"]]
    end = "ok" if doc["ok"] else f"{len(doc['problems'])} problem(s)"
    if doc["alerts"]:
        pending = all(a["status"] == "pending" for a in doc["alerts"])
        end += f", {len(doc['alerts'])} alert(s){' pending' if pending else ''}"
    lines.append(end)
    # names and reasons come from the registrations topic: no control character reaches a terminal
    return text(lines)


def alert_line(a: dict[str, Any]) -> str:
    """An alert the cycle raised; a pending one names the alert it becomes after ``alerts.for_s``."""
    if a["status"] == "pending":
        return (
            f"alert: {a['key']} pending ({a['alertname']} once it holds for alerts.for_s, {a['for_s']:g} s): "
            f"{a['reason']}"
        )
    return f"alert: {a['key']} {a['status']}: {a['reason']}"


def group_line(g: dict[str, Any]) -> str:
    """One group's would-be plan: its cross-rack partitions before and after, and why it would be published."""
    if g.get("problem"):
        return f"cannot be used: {g['problem']}"
    plan = g.get("plan")
    if g.get("plan_published") is False:  # assigned by the broker: judged, not planned
        live, best = g.get("live") or {}, g.get("achievable") or {}
        return (
            f"assigned by the broker ({g['path']}, assignor {g.get('assignor') or 'unknown'}): no plan; "
            f"cross-rack partitions live {live.get('cross_rack', 'unknown')}, achievable "
            f"{best.get('cross_rack', 'unknown')} of {best.get('total', 'unknown')}"
        )
    if plan is None:
        held = g.get("plan_of_record_generation")
        why = g.get("plan_skipped") or (
            f"its plan of record (generation {held}) holds" if held else "no plan"
        )
        return f"no new plan: {why}"
    before = plan["cross_rack_before"]
    change = f"{plan['cross_rack_after']}" if before is None else f"{before} -> {plan['cross_rack_after']}"
    return (
        f"generation {plan['generation']}, cross-rack partitions {change} of {plan['partitions']} "
        f"({plan['reason']})"
    )
