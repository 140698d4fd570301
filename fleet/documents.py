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
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import units


def digest(text: str) -> str:
    """The document's identity: sha256 of its UTF-8 text, hex (as Spark's ``sha2(value, 256)``)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Documents:
    """What the driver knows of the snapshot documents before evaluating them."""

    documents: int
    invalid: int
    keep: frozenset[str] | None
    groups: int
    sources: list[str]

    def units(self, per_group: int) -> int:
        """Units the run evaluates: ``per_group`` for each group of the chosen documents, one per bad
        document (its ``invalid`` row)."""
        return self.groups * per_group + self.invalid


def choose_documents(rows: Sequence[Mapping[str, Any]], history: str) -> Documents:
    """From one (source, cluster_id, taken_at, groups, digest) row per document: the documents to
    evaluate (newest per cluster, or all; one per (cluster, taken_at)) and their group count."""
    valid = [r for r in rows if r["cluster_id"] is not None]
    best: dict[tuple[str, str], Mapping[str, Any]] = {}
    for r in sorted(valid, key=lambda r: (str(r["source"]), str(r["digest"]))):
        best.setdefault((str(r["cluster_id"]), str(r["taken_at"] or "")), r)
    if history == "latest":
        newest: dict[str, str] = {}
        for cid, taken in best:
            newest[cid] = max(newest.get(cid, taken), taken)
        best = {k: v for k, v in best.items() if newest[k[0]] == k[1]}
    return Documents(
        documents=len(rows),
        invalid=len(rows) - len(valid),
        keep=frozenset(str(r["digest"]) for r in best.values()),
        groups=sum(int(r["groups"] or 0) for r in best.values()),
        sources=sorted({str(r["source"]) for r in rows}),
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
        groups = units.group_rows(rec["value"] or "", rec["source"])  # None: a Parquet row without it
        bad = len(groups) == 1 and groups[0]["kind"] == "snapshot"
        if not bad and (key in seen or (keep is not None and key not in keep)):
            continue
        seen.add(key)
        yield from groups


def listing(value: str, source: str) -> dict[str, Any]:
    """The row :func:`choose_documents` reads, as Spark's ``list`` job builds it (``get_json_object``:
    a field that is not a string is its JSON text; a document that is not an object has none)."""
    try:
        doc = json.loads(value)
    except (ValueError, RecursionError):
        doc = None
    if not isinstance(doc, dict):
        doc = {}

    def text(key: str) -> str | None:
        v = doc.get(key)
        return None if v is None else v if isinstance(v, str) else json.dumps(v, separators=(",", ":"))

    def count(key: str) -> int:
        v = doc.get(key)
        return len(v) if isinstance(v, list) else 0

    return {
        "source": source,
        "cluster_id": text("cluster_id"),
        "taken_at": text("taken_at"),
        "groups": count("consumer_groups") + count("streams_apps"),
        "digest": digest(value),
    }


# ---- reading local files (the in-process engine) ---------------------------------------

#: line breaks of Hadoop's text reader (what Spark splits ``*.jsonl`` on)
_LINES = re.compile(r"\r\n|\r|\n")


def source_uri(path: Path) -> str:
    """A file's ``source`` as Spark's ``_metadata.file_path`` gives it (``file:/abs/path``, Hadoop's form)."""
    return "file:" + path.resolve().as_uri()[len("file://") :]


def _without_nulls(v: Any) -> Any:
    """Spark's ``to_json`` of a row: fields that are null are left out, at every level."""
    if isinstance(v, dict):
        return {k: _without_nulls(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_without_nulls(x) for x in v]
    return v


def read_local(files: Sequence[str]) -> Iterator[dict[str, Any]]:
    """One record (``value``, ``source``, ``digest``) per document of local snapshot files."""
    for name in files:
        path = Path(name)
        source = source_uri(path)
        if path.suffix == ".json":
            values = [path.read_text(encoding="utf-8")]
        elif path.suffix == ".jsonl":
            lines = _LINES.split(path.read_text(encoding="utf-8"))
            values = [line for line in lines if line.strip(" ")]
        elif path.suffix == ".parquet":
            values = list(_parquet_documents(path))
        else:
            continue
        for v in values:
            yield {"value": v, "source": source, "digest": digest(v)}


def _parquet_documents(path: Path) -> Iterator[str]:
    import pyarrow.parquet as pq  # type: ignore[import-untyped,import-not-found,unused-ignore]

    table = pq.read_table(path)
    if "document" in table.column_names:
        for v in table.column("document").to_pylist():
            if v is not None:
                yield str(v)
        return
    for row in table.to_pylist():
        yield json.dumps(_without_nulls(row), separators=(",", ":"), ensure_ascii=False)
