"""Which snapshot documents a run evaluates, and their groups: the same rules for both engines.

Spark's ``list`` job and :mod:`rackplan.fleet.local` both reduce every
document to (``source``, ``cluster_id``, ``taken_at``, groups, ``digest``),
and :func:`choose_documents` picks from those rows; :func:`groups_of` turns the
chosen documents into group rows (what Spark's first Python pass runs).  The
digest is the sha256 of the document's text (Spark: ``sha2(value, 256)``),
so both engines pick the same document of two with the same cluster and time.

This module reads local files itself (:func:`read_local`) for the in-process
engine, with Spark's rules: ``*.json`` one document per file, ``*.jsonl`` one
per non-blank line, ``*.parquet`` one per row.  No Spark here.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from . import units
from .intake import parse_document, parse_taken_at, text_of, utf8


def digest(text: str) -> str:
    """The document's identity: sha256 of its bytes, hex (as Spark's ``sha2(value, 256)``)."""
    return hashlib.sha256(utf8(text)).hexdigest()


@dataclass(frozen=True)
class Documents:
    """What the driver knows of the snapshot documents before evaluating them."""

    documents: int
    invalid: int
    keep: frozenset[str] | None
    #: groups and apps of the chosen documents, and of those the Streams apps
    groups: int
    sources: list[str]
    apps: int = 0
    #: sha256 of every document's (source, digest), sorted: the identity of the run's input
    inputs: str = ""

    def units(self, scenarios: int, consumer_labels: int, streams_labels: int) -> int:
        """Units the run evaluates, exactly: each scenario x each label of each group or app of the chosen
        documents (a consumer group is compared across ``consumer_labels`` assignors, an app across
        ``streams_labels`` strategies), and one per document that does not parse (its ``invalid`` row)."""
        consumers = self.groups - self.apps
        return scenarios * (consumers * consumer_labels + self.apps * streams_labels) + self.invalid


def choose_documents(rows: Sequence[Mapping[str, Any]], history: str) -> Documents:
    """From one :func:`listing` row per document: the documents to evaluate (newest ``taken_at`` per
    cluster, compared as instants, or all; one per (cluster, instant)) and their group count."""
    valid: list[tuple[datetime, Mapping[str, Any]]] = []
    for r in rows:
        taken = parse_taken_at(r["taken_at"]) if r["cluster_id"] is not None else None
        if taken is not None:  # a listed document always has one (intake.parse_document)
            valid.append((taken, r))
    best: dict[tuple[str, datetime], Mapping[str, Any]] = {}
    for taken, r in sorted(valid, key=lambda tr: (str(tr[1]["source"]), str(tr[1]["digest"]))):
        best.setdefault((str(r["cluster_id"]), taken), r)
    if history == "latest":
        newest: dict[str, datetime] = {}
        for cid, taken in best:
            newest[cid] = max(newest.get(cid, taken), taken)
        best = {k: v for k, v in best.items() if newest[k[0]] == k[1]}
    return Documents(
        documents=len(rows),
        invalid=len(rows) - len(valid),
        keep=frozenset(str(r["digest"]) for r in best.values()),
        groups=sum(int(r["groups"] or 0) for r in best.values()),
        sources=sorted({str(r["source"]) for r in rows}),
        apps=sum(int(r["apps"] or 0) for r in best.values()),
        inputs=hashlib.sha256(
            utf8("\n".join(sorted(f"{r['source']}\t{r['digest']}" for r in rows)))
        ).hexdigest(),
    )


def groups_of(
    records: Iterable[Mapping[str, Any]], keep: frozenset[str] | None, seen: set[str]
) -> Iterator[dict[str, Any]]:
    """Group rows of the documents (``value``, ``source``, ``digest``) to evaluate.

    ``keep``: the digests chosen (None: every one); ``seen``: digests already
    expanded (identical lines of one archive count once).  A document that does
    not parse is always reported (an ``invalid`` row), whatever its age.
    """
    for rec in records:
        key = str(rec["digest"])
        groups = units.group_rows(text_of(rec["value"]), rec["source"])  # None: a Parquet row without it
        bad = len(groups) == 1 and groups[0]["kind"] == "snapshot"
        if not bad and (key in seen or (keep is not None and key not in keep)):
            continue
        seen.add(key)
        yield from groups


#: the columns of :func:`listing` (Spark's listing pass returns them)
LISTING_COLUMNS: tuple[tuple[str, str], ...] = (
    ("source", "string"),
    ("cluster_id", "string"),
    ("taken_at", "string"),
    ("groups", "long"),
    ("apps", "long"),
    ("digest", "string"),
)


def listing(value: str | bytes | None, source: str) -> dict[str, Any]:
    """The row :func:`choose_documents` reads (both engines): the document parsed as the group rows
    parse it (:func:`rackplan.fleet.intake.parse_document`); one that does not parse has no
    ``cluster_id`` (it is one ``invalid`` unit)."""
    text = text_of(value)
    row: dict[str, Any] = {"source": source, "cluster_id": None, "taken_at": None, "groups": 0, "apps": 0}
    try:
        snap = parse_document(text)
    except Exception:  # a bad document (or a bug): group_rows gives its one row
        snap = None
    if snap is not None:
        row.update(
            cluster_id=snap.cluster_id,
            taken_at=snap.taken_at,
            groups=len(snap.consumer_groups) + len(snap.streams_apps),
            apps=len(snap.streams_apps),
        )
    return {**row, "digest": digest(text)}


# ---- reading local files (the in-process engine) ---------------------------------------

#: line breaks of Hadoop's text reader (what Spark splits ``*.jsonl`` on)
_LINES = re.compile(r"\r\n|\r|\n")


#: what ``java.net.URI`` leaves as is in a path (Hadoop's ``Path``, hence Spark's ``_metadata.file_path``):
#: letters, digits, ``_-!.~'()*``, ``,;:$&+=``, ``/`` and ``@``; other ASCII is ``%XX``-escaped
_URI_PATH_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-!.~'()*,;:$&+=/@")


def _uri_char(c: str) -> str:
    """One path character as ``java.net.URI`` writes it: non-ASCII stays as is unless it is a space
    or control character (``Character.isSpaceChar``, ``isISOControl``), which is escaped as UTF-8."""
    if c in _URI_PATH_SAFE:
        return c
    if ord(c) > 0x9F and unicodedata.category(c) not in ("Zs", "Zl", "Zp"):
        return c
    return "".join(f"%{b:02X}" for b in c.encode("utf-8", "surrogateescape"))


def source_uri(path: Path) -> str:
    """A file's ``source`` as Spark's ``_metadata.file_path`` gives it (``file:/abs/path``, Hadoop's form:
    ``é`` as is, a space as ``%20``)."""
    return "file:" + "".join(_uri_char(c) for c in str(path.resolve()))


def _without_nulls(v: Any) -> Any:
    """Spark's ``to_json`` of a row: fields that are null are left out, at every level."""
    if isinstance(v, dict):
        return {k: _without_nulls(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_without_nulls(x) for x in v]
    return v


def blank(line: str) -> bool:
    """A line of an archive that holds no document: empty, or JSON whitespace only (spaces, tabs)."""
    return not line.strip(" \t")


def read_local(files: Sequence[str]) -> Iterator[dict[str, Any]]:
    """One record (``value``, ``source``, ``digest``) per document of local snapshot files (their text
    as :func:`rackplan.fleet.intake.text_of` decodes it: bytes that are not UTF-8 make a bad document)."""
    for name in files:
        path = Path(name)
        source = source_uri(path)
        if path.suffix == ".json":
            values = [text_of(path.read_bytes())]
        elif path.suffix == ".jsonl":
            values = [line for line in _LINES.split(text_of(path.read_bytes())) if not blank(line)]
        elif path.suffix == ".parquet":
            values = list(_parquet_documents(path))
        else:
            continue
        for v in values:
            yield {"value": v, "source": source, "digest": digest(v)}


def _parquet_documents(path: Path) -> Iterator[str]:
    import pyarrow as pa  # type: ignore[import-untyped,import-not-found,unused-ignore]
    import pyarrow.parquet as pq  # type: ignore[import-untyped,import-not-found,unused-ignore]

    from .storage import InputError

    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as e:  # as Spark fails to read it: the run stops (exit 2)
        raise InputError(f"--snapshots: {path}: not a readable Parquet file ({e})") from None
    if "document" in table.column_names:
        for v in table.column("document").to_pylist():
            if v is not None:
                yield str(v)
        return
    for row in table.to_pylist():
        yield json.dumps(_without_nulls(row), separators=(",", ":"), ensure_ascii=False, default=str)
