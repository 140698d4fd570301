"""One unit of fleet work, as plain rows: no Spark here, so tests and benchmarks call it directly.

The job's three stages are the three functions of this module:

1. :func:`group_rows`: a snapshot document -> one row per registered group or
   app, holding the slice of the cluster it reads;
2. :func:`unit_rows`: a group row -> one row per (scenario, assignor), each an
   instance of the contract.  The group's *current* assignment (its ``owned``
   partitions, or else the plan of its registered assignor on the snapshot as
   it is) is the sticky input of every instance, so ``moved`` counts what
   reaching that plan would move;
3. :func:`evaluate`: a unit row -> its figures, computed with
   :func:`rackplan.assignor.cli.assign_document`, the exact ``rackplan assign``.

The job runs 2 and 3 as one pass per group, :func:`group_results`, with the
units in memory (no instance is serialized); ``unit_rows`` and ``evaluate``
remain the replayable, row-by-row form (tests compare the two).

A cooperative plan withholds partitions that change owner (``revoked``); the
locality and cost of a unit are those of the settled assignment, after the
follow-up rebalance(s) that assign them, which is again ``rackplan assign`` on
the next round's instance.
"""

from __future__ import annotations

import copy
import hashlib
import json
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from rackplan.agent.cluster.archive import ClusterState, SnapshotError
from rackplan.agent.planning.traffic_input import wants_traffic
from rackplan.assignor import (
    FOLLOW_UP_LIMIT,
    Cluster,
    ConsumerGroup,
    InputError,
    StreamsApp,
    app_topics,
    group_topics,
    parse_instance,
    plan_model,
    settle_cooperative,
    subtopologies_of,
    task_partitions,
)
from rackplan.assignor.cli import assign_document
from rackplan.assignor.model import CONSUMER_ASSIGNORS, RACK_STRATEGIES

from .figures import DEFAULT_PRICE_PER_GB, Figures, Judge
from .intake import DocumentError, parse_document, refusal
from .labels import (
    assignor_labels,
    reference_label,
    registered_label,
    with_assignor,
)
from .scenarios import BASELINE, CONSUMER, STREAMS, NotApplicable, Scenario, Unit, apply, offline_partitions

#: rounds a cooperative plan may take (the first and its follow-ups); Kafka's settle in two, more is an error
MAX_ROUNDS = 1 + FOLLOW_UP_LIMIT

OK = "ok"
INVALID = "invalid"  # the registration or snapshot breaks the contract
NOT_APPLICABLE = "n/a"  # the scenario does not apply to this cluster or group
FAILED = "failed"  # an unexpected error: a bug to report

GROUP_COLUMNS: tuple[tuple[str, str], ...] = (
    ("cluster_id", "string"),
    ("taken_at", "string"),
    ("kind", "string"),
    ("group", "string"),
    ("fetch_mode", "string"),
    ("registered", "string"),
    ("payload", "string"),
    ("status", "string"),
    ("detail", "string"),
)

UNIT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("cluster_id", "string"),
    ("taken_at", "string"),
    ("kind", "string"),
    ("group", "string"),
    ("scenario", "string"),
    ("assignor", "string"),
    ("registered", "boolean"),
    ("reference", "boolean"),
    ("fetch_mode", "string"),
    ("payload", "string"),
    ("status", "string"),
    ("detail", "string"),
)

RESULT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("cluster_id", "string"),
    ("taken_at", "string"),
    ("kind", "string"),
    ("group", "string"),
    ("scenario", "string"),
    ("assignor", "string"),
    ("registered", "boolean"),
    ("reference", "boolean"),
    ("fetch_mode", "string"),
    ("status", "string"),
    ("detail", "string"),
    ("members", "long"),
    ("partitions", "long"),
    ("pairs", "long"),
    ("pairs_with_traffic", "long"),
    ("offline_partitions", "long"),
    ("bytes_per_s", "double"),
    ("cross_nearest", "long"),
    ("cross_leader", "long"),
    ("cross_bytes_nearest", "double"),
    ("cross_bytes_leader", "double"),
    ("cost_nearest_usd_month", "double"),
    ("cost_leader_usd_month", "double"),
    ("unfixable_bytes_nearest", "double"),
    ("unfixable_bytes_leader", "double"),
    ("unfixable_nearest_usd_month", "double"),
    ("unfixable_leader_usd_month", "double"),
    ("moved", "long"),
    ("revoked", "long"),
    ("rounds", "long"),
    ("max_minus_min", "double"),
    ("cross_rack_contract", "long"),
    ("plan_sha256", "string"),
    ("elapsed_ms", "double"),
    ("instance", "string"),
    ("plan", "string"),
    ("settled_instance", "string"),
    ("settled_plan", "string"),
)


def dumps(doc: Any) -> str:
    """Canonical JSON, as ``rackplan assign`` prints it."""
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)


def _row(columns: Sequence[tuple[str, str]], **values: Any) -> dict[str, Any]:
    return {name: values.get(name) for name, _ in columns}


# ---- stage 1: snapshot -> groups ---------------------------------------------------


def _topics_of(kind: str, spec: Mapping[str, Any], state: ClusterState) -> ClusterState:
    """The slice of the cluster a group reads; all of it when the registration is too malformed to say
    which (:func:`_current_unit` then says what the contract refuses in it)."""
    try:
        return state.restrict(group_topics(spec) if kind == CONSUMER else app_topics(spec))
    except Exception:  # e.g. ``members: 5``
        return state


def group_rows(text: str, source: str = "") -> list[dict[str, Any]]:
    """Stage 1: one row per group and app of a snapshot document; one ``invalid`` row, under the file's
    name, when it does not parse (:func:`rackplan.fleet.intake.parse_document`), ``failed`` for a bug."""
    try:
        snap = parse_document(text)
    except Exception as e:  # DocumentError: the document breaks the format; anything else: a bug
        why = str(e) if isinstance(e, DocumentError) else f"{type(e).__name__}: {e}"
        key = dict.fromkeys(("taken_at", "group", "fetch_mode", "registered", "payload"), "")
        status = INVALID if isinstance(e, DocumentError) else FAILED
        key |= {"cluster_id": source or "(unknown)", "kind": "snapshot", "status": status}
        return [_row(GROUP_COLUMNS, **key, detail=f"snapshot {source}: {why}")]
    out = []
    for kind, specs in ((CONSUMER, snap.consumer_groups), (STREAMS, snap.streams_apps)):
        for spec in specs:
            name = str(spec["group_id" if kind == CONSUMER else "application_id"])
            body = {k: v for k, v in spec.items() if k != "fetch_mode"}
            state = _topics_of(kind, body, snap.state)
            out.append(
                _row(
                    GROUP_COLUMNS,
                    cluster_id=snap.cluster_id,
                    taken_at=snap.taken_at,
                    kind=kind,
                    group=name,
                    fetch_mode=str(spec["fetch_mode"]),
                    registered=registered_label(kind, body),
                    payload=dumps({"state": state.to_json(), "spec": body}),
                    status=OK,
                    detail="",
                )
            )
    return out


# ---- stage 2: group -> units -----------------------------------------------------


def instance_document(kind: str, state: ClusterState, spec: Mapping[str, Any]) -> dict[str, Any]:
    """The contract instance of a group on a cluster state.

    A group whose plan weighs bytes (``objective``/``balance: bytes``, Streams ``weigh_by_traffic``: the
    agent's own rule, :func:`~rackplan.agent.planning.traffic_input.wants_traffic`) gets the snapshot's
    traffic as ``cluster.traffic``, for the topics whose every partition is known (the contract has no
    "unknown" per partition); every other instance is exactly as without traffic.
    """
    cluster = state.cluster_json()
    if wants_traffic(kind, spec):
        known = {t: list(v) for t, v in sorted(state.traffic.items()) if t in state.topics and None not in v}
        if known:
            cluster["traffic"] = known
    return {"cluster": cluster, ("consumer_group" if kind == CONSUMER else "streams_app"): spec}


def with_current(kind: str, state: ClusterState, spec: Mapping[str, Any]) -> dict[str, Any]:
    """The spec with its current assignment as sticky input.

    A registration that already says what members own is kept as it is;
    otherwise the current assignment is the registered assignor's plan on
    the snapshot (what the agent would have published), claimed at generation 1.
    """
    out = copy.deepcopy(dict(spec))
    if kind == CONSUMER:
        members = out.get("members") or []
        if any(isinstance(m, dict) and m.get("owned") for m in members):
            return out
        plan = assign_document(instance_document(kind, state, out))["consumer_group"]
        for m in members:
            mid = m["member_id"]
            m["owned"] = [*plan["assignment"].get(mid, []), *plan["revoked"].get(mid, [])]
            m["generation"] = 1
        return out
    clients = out.get("clients") or []
    if any(isinstance(c, dict) and (c.get("previous_active") or c.get("previous_standby")) for c in clients):
        return out
    plan = assign_document(instance_document(kind, state, out))["streams_app"]["assignment"]
    for c in clients:
        a = plan.get(c["process_id"], {})
        c["previous_active"] = list(a.get("active", []))
        c["previous_standby"] = list(a.get("standby", []))
    return out


def _current_unit(row: Mapping[str, Any], payload: Mapping[str, Any]) -> tuple[Unit | None, str, str]:
    """The group on the snapshot with its current assignment, or (None, status, why not)."""
    kind = str(row["kind"])
    try:
        state = ClusterState.from_json(payload["state"])
        spec = with_current(kind, state, payload["spec"])
    except (InputError, SnapshotError, NotImplementedError) as e:
        return None, INVALID, str(e)
    except Exception as e:  # the contract's own check says whether the registration broke it, else a bug
        why = refusal(
            lambda: instance_document(kind, ClusterState.from_json(payload["state"]), payload["spec"])
        )
        return None, *((INVALID, why) if why is not None else (FAILED, f"{type(e).__name__}: {e}"))
    return Unit(str(row["cluster_id"]), kind, state, spec), OK, ""


def _units_of(
    row: Mapping[str, Any],
    scenarios: Sequence[Scenario],
    consumer_assignors: Sequence[str],
    strategies: Sequence[str],
) -> Iterator[tuple[dict[str, Any], Unit | None, str, str]]:
    """Every (scenario, assignor) of a group row: its key columns, its unit (None when not evaluated),
    status and detail.  In memory: the one-pass job evaluates them without serializing instances."""
    common = {k: row[k] for k in ("cluster_id", "taken_at", "kind", "group", "fetch_mode")}
    if row["status"] != OK:
        key = {**common, "scenario": "", "assignor": "", "registered": False, "reference": False}
        yield key, None, str(row["status"]), str(row["detail"])
        return
    kind = str(row["kind"])
    payload = json.loads(row["payload"])
    labels = assignor_labels(kind, payload["spec"], consumer_assignors, strategies)
    registered, reference = str(row["registered"]), reference_label(kind, payload["spec"])
    base, base_status, base_detail = _current_unit(row, payload)
    for scenario in scenarios:
        unit, status, detail = None, base_status, base_detail
        if base is not None:
            try:
                unit = apply(scenario, base)
            except NotApplicable as e:
                status, detail = NOT_APPLICABLE, str(e)
            except Exception as e:  # a bug: this scenario's units report it, the fleet goes on
                status, detail = FAILED, f"{type(e).__name__}: {e}"
            if unit is not None and scenario.name != BASELINE and unit == base:
                # Nothing this group reads or runs on changed (no topic, group or rack of the
                # scenario matches it): not a what-if for this group, so no figures to compare.
                unit, status = None, NOT_APPLICABLE
                detail = f"scenario {scenario.name!r} changes nothing this group reads"
        for label in labels:
            key = {
                **common,
                "scenario": scenario.name,
                "assignor": label,
                "registered": label == registered,
                "reference": label == reference,
            }
            if unit is None:
                yield key, None, status, detail
            else:
                yield (
                    key,
                    Unit(unit.cluster_id, kind, unit.state, with_assignor(kind, unit.spec, label)),
                    OK,
                    "",
                )


def unit_rows(
    row: Mapping[str, Any],
    scenarios: Sequence[Scenario],
    consumer_assignors: Sequence[str] = CONSUMER_ASSIGNORS,
    strategies: Sequence[str] = RACK_STRATEGIES,
) -> list[dict[str, Any]]:
    """Stage 2 as rows: one per (scenario, assignor) of a group row, the instance serialized in ``payload``."""
    out = []
    for key, unit, status, detail in _units_of(row, scenarios, consumer_assignors, strategies):
        payload = "" if unit is None else dumps({"state": unit.state.to_json(), "spec": unit.spec})
        out.append(_row(UNIT_COLUMNS, **key, payload=payload, status=status, detail=detail))
    return out


def group_results(
    row: Mapping[str, Any],
    scenarios: Sequence[Scenario],
    price_per_gb: float = DEFAULT_PRICE_PER_GB,
    keep_plans: bool = False,
    consumer_assignors: Sequence[str] = CONSUMER_ASSIGNORS,
    strategies: Sequence[str] = RACK_STRATEGIES,
) -> list[dict[str, Any]]:
    """Stages 2 and 3 in one pass: the figures of every unit of a group row (what the job runs).

    Equal, row for row, to :func:`evaluate` over :func:`unit_rows` (a test checks it).
    """
    out = []
    for key, unit, status, detail in _units_of(row, scenarios, consumer_assignors, strategies):
        if unit is None:
            out.append(_row(RESULT_COLUMNS, **key, status=status, detail=detail))
        else:
            out.append(evaluate_unit(key, unit.kind, unit.state, unit.spec, price_per_gb, keep_plans))
    return out


#: the figures the derived tables compare (``ref_*``: the reference assignor's, ``base_*``: the baseline's)
_COMPARED_NAMES = frozenset(
    {
        "cross_nearest",
        "cross_leader",
        "cross_bytes_nearest",
        "cross_bytes_leader",
        "cost_nearest_usd_month",
        "cost_leader_usd_month",
        "moved",
        "max_minus_min",
    }
)
#: taken from RESULT_COLUMNS (their order and types), so the two never disagree
COMPARED: tuple[tuple[str, str], ...] = tuple(c for c in RESULT_COLUMNS if c[0] in _COMPARED_NAMES)

#: what :func:`with_comparisons` adds to a result row (the job's ``assignors`` and ``scenarios`` tables)
COMPARISON_COLUMNS: tuple[tuple[str, str], ...] = (
    ("reference_assignor", "string"),
    *((f"ref_{c}", t) for c, t in COMPARED),
    *((f"base_{c}", t) for c, t in COMPARED),
)

_GROUP_KEY = ("cluster_id", "taken_at", "kind", "group")


def with_comparisons(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Result rows with the reference's and the baseline's figures beside their own.

    For every row: ``reference_assignor`` and ``ref_*``, from the ``ok`` row of
    the reference assignor on the same group and scenario, and ``base_*``, from
    the ``ok`` baseline row of the same group and assignor (null when there is
    none; of several, the largest, as SQL's ``max`` over a window would).  A
    group's units all come from one :func:`group_results` call, so the job
    derives the ``assignors`` and ``scenarios`` tables in the Python pass that
    computed the figures: no window function, no shuffle of figures.
    """
    refs: dict[tuple[Any, ...], dict[str, Any]] = {}
    bases: dict[tuple[Any, ...], dict[str, Any]] = {}

    def keep_max(into: dict[str, Any], name: str, value: Any) -> None:
        if value is not None and (into.get(name) is None or value > into[name]):
            into[name] = value

    for r in rows:
        if r.get("status") != OK:
            continue
        group = tuple(r.get(k) for k in _GROUP_KEY)
        if r.get("reference"):
            ref = refs.setdefault((*group, r.get("scenario")), {})
            keep_max(ref, "reference_assignor", r.get("assignor"))
            for c, _ in COMPARED:
                keep_max(ref, f"ref_{c}", r.get(c))
        if r.get("scenario") == BASELINE:
            base = bases.setdefault((*group, r.get("assignor")), {})
            for c, _ in COMPARED:
                keep_max(base, f"base_{c}", r.get(c))
    out = []
    for r in rows:
        group = tuple(r.get(k) for k in _GROUP_KEY)
        out.append(
            {
                **r,
                **refs.get((*group, r.get("scenario")), {}),
                **bases.get((*group, r.get("assignor")), {}),
            }
        )
    return out


# ---- stage 3: unit -> figures ----------------------------------------------------


def plan_digest(plan: Mapping[str, Any]) -> str:
    """sha256 of a plan document's canonical JSON, ``elapsed_ms`` aside (the contract's invariant 3)."""
    return hashlib.sha256(dumps(_without_elapsed(plan)).encode()).hexdigest()


def _without_elapsed(plan: Mapping[str, Any]) -> dict[str, Any]:
    doc = dict(plan)
    doc["stats"] = {k: v for k, v in plan["stats"].items() if k != "elapsed_ms"}
    return doc


def _parsed(instance: Mapping[str, Any], kind: type[ConsumerGroup] | type[StreamsApp]) -> tuple[Cluster, Any]:
    cluster, spec = parse_instance(instance)
    if not isinstance(spec, kind):
        raise InputError("(document)", f"expected a {kind.__name__} instance")
    return cluster, spec


def _consumer(instance: dict[str, Any], state: ClusterState, keep: bool) -> tuple[dict[str, Any], Figures]:
    """The figures of a consumer unit: its first round, and its settled assignment after the follow-ups.

    One parse; the follow-up rounds are typed (:func:`~rackplan.assignor.contract.settle_cooperative`),
    each at the next generation, and at most ``MAX_ROUNDS`` rounds in all.
    """
    from rackplan.assignor import consumer_document as document
    from rackplan.assignor import run_assignor

    start = time.perf_counter()
    cluster, group = _parsed(instance, ConsumerGroup)
    plan, elapsed_ms = run_assignor(cluster, group)
    first = document(cluster, group, plan, elapsed_ms)
    generation = max(
        (int(m.get("generation") or 0) for m in instance["consumer_group"]["members"]), default=0
    )

    def next_generation(_group: ConsumerGroup) -> int:
        nonlocal generation
        generation += 1
        return generation

    end = settle_cooperative(
        group, plan, elapsed_ms, lambda g: run_assignor(cluster, g), MAX_ROUNDS - 1, next_generation
    )
    if not end.settled:
        raise RuntimeError(f"cooperative plan not settled after {MAX_ROUNDS} rounds")
    rounds = end.follow_ups + 1
    last = first if rounds == 1 else document(cluster, end.group, end.plan, end.elapsed_ms)
    elapsed = (time.perf_counter() - start) * 1000.0
    racks = {m.member_id: m.rack for m in group.members}
    figures = Figures(Judge(state, cluster), racks.values())
    for mid, parts in last["consumer_group"]["assignment"].items():
        for t, p in parts:
            figures.add(racks[mid], t, p)
    if figures.cross_nearest != last["stats"]["cross_rack"]:
        raise RuntimeError(
            f"cross-rack count {figures.cross_nearest} != the contract's {last['stats']['cross_rack']}"
        )
    cols: dict[str, Any] = {
        "members": len(racks),
        "partitions": first["stats"]["partitions"],
        "moved": first["stats"]["moved"],
        "revoked": sum(len(v) for v in first["consumer_group"]["revoked"].values()),
        "rounds": rounds,
        "max_minus_min": float(last["stats"]["max_minus_min"]),
        "cross_rack_contract": first["stats"]["cross_rack"],
        "plan_sha256": plan_digest(first),
        "elapsed_ms": elapsed,
    }
    if keep:
        cols["plan"] = dumps(_without_elapsed(first))
        if rounds > 1:
            cols["settled_instance"] = dumps(_settled_instance(instance, end.group))
            cols["settled_plan"] = dumps(_without_elapsed(last))
    return cols, figures


def _settled_instance(instance: Mapping[str, Any], group: ConsumerGroup) -> dict[str, Any]:
    """The instance of the last follow-up round: the document's members owning what ``group``'s do."""
    by_id = {m.member_id: m for m in group.members}
    members = [
        {
            **m,
            "owned": [list(tp) for tp in by_id[m["member_id"]].owned],
            "generation": by_id[m["member_id"]].generation,
        }
        for m in instance["consumer_group"]["members"]
    ]
    return {**instance, "consumer_group": {**instance["consumer_group"], "members": members}}


def _streams(instance: dict[str, Any], state: ClusterState, keep: bool) -> tuple[dict[str, Any], Figures]:
    start = time.perf_counter()
    cluster, app = _parsed(instance, StreamsApp)
    plan = plan_model(cluster, app)
    elapsed = (time.perf_counter() - start) * 1000.0
    subs = subtopologies_of(app)
    racks = {c.process_id: c.rack for c in app.clients}
    previous = {t: c.process_id for c in app.clients for t in c.previous_active}
    figures = Figures(Judge(state, cluster), racks.values())
    standby = Figures(Judge(state, cluster), racks.values())
    moved = 0
    for pid, a in plan["streams_app"]["assignment"].items():
        for task in a["active"]:
            moved += task in previous and previous[task] != pid
            for t, p in task_partitions(subs, cluster.topics, task):
                figures.add(racks[pid], t, p)
        for task in a["standby"]:
            for t, p in task_partitions(subs, cluster.topics, task, standby=True):
                standby.add(racks[pid], t, p)
                figures.add(racks[pid], t, p)
    stats = plan["stats"]
    if (figures.cross_nearest - standby.cross_nearest, standby.cross_nearest) != (
        stats["active_cross_rack"],
        stats["standby_cross_rack"],
    ):
        raise RuntimeError("cross-rack task partitions differ from the contract's counts")
    cols: dict[str, Any] = {
        "members": len(racks),
        "partitions": stats["tasks"],
        "moved": moved,
        "revoked": 0,
        "rounds": 1,
        "max_minus_min": float(stats["max_minus_min_active_per_thread"]),
        "cross_rack_contract": stats["active_cross_rack"] + stats["standby_cross_rack"],
        "plan_sha256": plan_digest(plan),
        "elapsed_ms": elapsed,
    }
    if keep:
        cols["plan"] = dumps(_without_elapsed(plan))
    return cols, figures


def evaluate(
    row: Mapping[str, Any], price_per_gb: float = DEFAULT_PRICE_PER_GB, keep_plans: bool = False
) -> dict[str, Any]:
    """Stage 3: the figures of one unit row (a row of :data:`RESULT_COLUMNS`)."""
    common = {k: row[k] for k, _ in UNIT_COLUMNS if k not in ("payload", "status", "detail")}
    if row["status"] != OK:
        return _row(RESULT_COLUMNS, **common, status=row["status"], detail=row["detail"])
    payload = json.loads(row["payload"])
    state = ClusterState.from_json(payload["state"])
    return evaluate_unit(common, str(row["kind"]), state, payload["spec"], price_per_gb, keep_plans)


def evaluate_unit(
    common: Mapping[str, Any],
    kind: str,
    state: ClusterState,
    spec: Mapping[str, Any],
    price_per_gb: float = DEFAULT_PRICE_PER_GB,
    keep_plans: bool = False,
) -> dict[str, Any]:
    """The figures of one unit (``common``: its key columns)."""
    instance = instance_document(kind, state, spec)
    try:
        cols, figures = (_consumer if kind == CONSUMER else _streams)(instance, state, keep_plans)
    except (InputError, NotImplementedError) as e:
        return _row(RESULT_COLUMNS, **common, status=INVALID, detail=str(e))
    except Exception as e:  # a bug: keep the fleet going, report it
        return _row(RESULT_COLUMNS, **common, status=FAILED, detail=f"{type(e).__name__}: {e}")
    if keep_plans:
        cols["instance"] = dumps(instance)
    return _row(
        RESULT_COLUMNS,
        **common,
        status=OK,
        detail="",
        offline_partitions=offline_partitions(state),
        **cols,
        **figures.columns(price_per_gb),
    )
