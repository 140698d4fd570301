"""Where the fleet job reads snapshots and writes tables: local paths, ``file://`` and other URIs.

Two jobs, both on the driver and both small:

* :func:`check_inputs` refuses, before Spark starts, snapshot paths that
  cannot hold a snapshot (a local path or ``file://`` URI that does not
  exist, a glob that matches nothing, a folder without ``*.json``,
  ``*.jsonl`` or ``*.parquet``), so the user gets exit 2 and one clear line
  instead of a stack trace a minute later.  Other URIs (``hdfs://``,
  ``s3a://``...) are listed by Spark itself.
* :class:`Store` is the handful of file-system calls an atomic run needs
  (exists, rename, delete, write a small text file): the local file system
  for local paths and ``file://``, the Hadoop ``FileSystem`` API of the Spark
  session for any other URI.
"""

from __future__ import annotations

import glob
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse

#: file names the job reads as snapshots
SNAPSHOT_SUFFIXES = (".json", ".jsonl", ".parquet")
_GLOB_CHARS = frozenset("*?[{")


class InputError(ValueError):
    """Snapshot paths that cannot be read (exit 2)."""


def local_path(uri: str) -> str | None:
    """The local path of a plain path or a ``file:`` URI; None for other schemes."""
    if "://" not in uri and not uri.startswith("file:"):
        return uri
    parsed = urlparse(uri)
    if parsed.scheme == "file" and parsed.netloc in ("", "localhost"):
        return parsed.path
    return None


def _snapshot_files_under(directory: Path) -> list[Path]:
    return sorted(f for f in directory.rglob("*") if f.suffix in SNAPSHOT_SUFFIXES and f.is_file())


def check_inputs(paths: Sequence[str]) -> list[str]:
    """The snapshot files named by local paths (sorted), after checking every local path or glob.

    Raises :class:`InputError` naming the path.  URIs of other schemes are not
    checked here (Spark lists them).
    """
    if not paths:
        raise InputError("--snapshots: no path given")
    found: list[Path] = []
    for given in paths:
        path = local_path(given)
        if path is None:
            continue
        if any(c in path for c in _GLOB_CHARS):
            matches = [Path(m) for m in sorted(glob.glob(path))]
            if not matches:
                raise InputError(f"--snapshots: no file matches {given}")
        else:
            if not Path(path).exists():
                raise InputError(f"--snapshots: no such snapshot file or directory: {given}")
            matches = [Path(path)]
        files = [f for m in matches for f in (_snapshot_files_under(m) if m.is_dir() else [m])]
        files = [f for f in files if f.suffix in SNAPSHOT_SUFFIXES]
        if not files:
            raise InputError(f"--snapshots: no snapshot files ({', '.join(SNAPSHOT_SUFFIXES)}) in {given}")
        found.extend(files)
    return [str(f) for f in sorted(set(found))]


class Store(Protocol):
    """The file-system calls of a run's commit."""

    def exists(self, path: str) -> bool: ...
    def rename(self, src: str, dst: str) -> None: ...
    def delete(self, path: str) -> None: ...
    def write_text(self, path: str, text: str) -> None: ...


class LocalStore:
    """Local paths and ``file://`` URIs."""

    def _p(self, path: str) -> Path:
        local = local_path(path)
        if local is None:
            raise ValueError(f"not a local path: {path}")
        return Path(local)

    def exists(self, path: str) -> bool:
        return self._p(path).exists()

    def rename(self, src: str, dst: str) -> None:
        target = self._p(dst)
        target.parent.mkdir(parents=True, exist_ok=True)
        self._p(src).rename(target)

    def delete(self, path: str) -> None:
        p = self._p(path)
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()

    def write_text(self, path: str, text: str) -> None:
        p = self._p(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(p.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(p)  # readers never see half a file


class HadoopStore:
    """Any URI Spark can write (``hdfs://``, ``s3a://``, ``abfs://``, ``file://``), through the
    Hadoop ``FileSystem`` API of a classic Spark session (not available under Spark Connect)."""

    def __init__(self, spark: Any) -> None:
        self._jvm = spark._jvm
        self._conf = spark._jsc.hadoopConfiguration()

    def _fs(self, path: str) -> tuple[Any, Any]:
        p = self._jvm.org.apache.hadoop.fs.Path(path)
        return p.getFileSystem(self._conf), p

    def exists(self, path: str) -> bool:
        fs, p = self._fs(path)
        return bool(fs.exists(p))

    def rename(self, src: str, dst: str) -> None:
        fs, s = self._fs(src)
        _, d = self._fs(dst)
        fs.mkdirs(d.getParent())
        if not fs.rename(s, d):
            raise OSError(f"cannot rename {src} to {dst}")

    def delete(self, path: str) -> None:
        fs, p = self._fs(path)
        fs.delete(p, True)

    def write_text(self, path: str, text: str) -> None:
        fs, p = self._fs(path)
        out = fs.create(p, True)  # overwrite
        try:
            out.write(bytearray(text.encode("utf-8")))
        finally:
            out.close()


def store_for(out: str, spark: Any) -> Store | None:
    """The store of ``out``: local for local paths, Hadoop's for URIs; None when neither is reachable
    (a URI under Spark Connect, whose client has no Hadoop ``FileSystem``)."""
    if local_path(out) is not None:
        return LocalStore()
    try:
        return HadoopStore(spark)
    except Exception:  # Spark Connect: no JVM on this side
        return None


def read_text(uri: str) -> str:
    """A small text file from a local path or any URI pyarrow's file systems know (``file://``,
    ``s3://``, ``gs://``, ``hdfs://`` with libhdfs; ``s3a://`` is read as ``s3://``)."""
    fs, path = filesystem(uri)
    with fs.open_input_stream(path) as f:
        data: bytes = f.read()
    return data.decode("utf-8")


def filesystem(uri: str) -> tuple[Any, str]:
    """(pyarrow file system, path inside it) of a local path or URI."""
    from pyarrow import fs  # type: ignore[import-untyped,import-not-found,unused-ignore]

    local = local_path(uri)
    if local is not None:
        return fs.LocalFileSystem(), str(Path(local).resolve())
    if uri.startswith(("s3a://", "s3n://")):
        uri = "s3://" + uri.split("://", 1)[1]
    filesystem_, path = fs.FileSystem.from_uri(uri)
    return filesystem_, str(path)


def read_table(uri: str, columns: Sequence[str] | None = None) -> Any:
    """A table the job wrote (Hive-partitioned Parquet) as Arrow, from a local path or URI.

    Partition columns are read as plain text (not dictionaries: a partition of
    unparsable snapshots has a null ``snapshot_date``)."""
    import pyarrow as pa  # type: ignore[import-untyped,import-not-found,unused-ignore]
    import pyarrow.dataset as ds  # type: ignore[import-untyped,import-not-found,unused-ignore]

    fs, path = filesystem(uri)
    parts = ds.partitioning(
        pa.schema([("cluster_id", pa.string()), ("snapshot_date", pa.string())]), flavor="hive"
    )
    dataset = ds.dataset(path, filesystem=fs, format="parquet", partitioning=parts)
    names = [c for c in columns if c in dataset.schema.names] if columns is not None else None
    return dataset.to_table(columns=names)
