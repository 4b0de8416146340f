"""Trace rows -> Parquet (zstd), and back.

A dataset directory holds one file per session, partitioned Hive-style by GPU and by the UTC day the
session started::

    DIR/gpu=H200/date=2026-11-30/20261130-094512-softmax_fp32-3f9a.parquet

Adding a session writes its own new file and touches no other; exporting a session again replaces
only that session's file (and only when its content changed). The partition keys are named ``gpu``
and ``date``, not after a column: a reader that adds Hive columns (pandas, duckdb) would otherwise
meet two ``hardware`` columns. A single ``.parquet`` file holds any number of sessions, one per row.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pyarrow as pa
import pyarrow.parquet as pq

from openkernel.errors import ConfigError
from openkernel.traces.build import TraceRow, build_trace
from openkernel.traces.schema import OPTIMIZATION_TRACE, TRACE_SCHEMA_VERSION

__all__ = ["Written", "export_session", "partition_of", "read_traces", "to_table", "write_file", "write_session"]

COMPRESSION = "zstd"


@dataclass(frozen=True)
class Written:
    """What writing one session into a dataset did."""

    session_id: str
    path: Path
    action: Literal["added", "replaced", "unchanged"]
    iterations: int


def to_table(rows: Sequence[TraceRow]) -> pa.Table:
    """The rows as a table of the trace schema (a row that does not fit it is our bug: it raises)."""
    return pa.Table.from_pylist(list(rows), schema=OPTIMIZATION_TRACE)


def partition_of(row: TraceRow) -> tuple[str, str]:
    """``("H200", "2026-11-30")``: the GPU without its vendor prefix, and the UTC day the session started."""
    label = re.sub(r"^nvidia\s+", "", str(row["hardware"]).strip(), flags=re.IGNORECASE)
    gpu = re.sub(r"[^A-Za-z0-9.-]+", "_", label).strip("_") or "unknown"
    day = time.strftime("%Y-%m-%d", time.gmtime(float(row["started_at_unix_s"])))
    return gpu, day


def write_session(row: TraceRow, dataset: Path) -> Written:
    """Add (or replace) one session's file in the dataset directory ``dataset``."""
    session_id = str(row["session_id"])
    gpu, day = partition_of(row)
    name = f"{session_id}.parquet"
    target = dataset / f"gpu={gpu}" / f"date={day}" / name
    data = _parquet_bytes(to_table([row]))
    stale = [p for p in dataset.glob(f"gpu=*/date=*/{name}") if p != target]  # an earlier export elsewhere
    iterations = len(row["iterations"])
    if not stale and target.is_file() and target.read_bytes() == data:
        return Written(session_id, target, "unchanged", iterations)
    action: Literal["added", "replaced"] = "replaced" if stale or target.exists() else "added"
    _write_atomic(target, data)
    for path in stale:
        path.unlink()
    return Written(session_id, target, action, iterations)


def export_session(session_dir: Path, dataset: Path) -> Written:
    """Trace the session recorded in ``session_dir`` into the dataset directory ``dataset``."""
    return write_session(build_trace(session_dir), dataset)


def write_file(rows: Sequence[TraceRow], path: Path) -> Path:
    """All ``rows`` in one Parquet file at ``path`` (replaced when it exists)."""
    _write_atomic(path, _parquet_bytes(to_table(rows)))
    return path


def read_traces(path: Path) -> pa.Table:
    """Every trace in ``path`` (a trace file, or a dataset directory) as one table of the trace schema."""
    if not path.exists():
        raise ConfigError(f"{path} does not exist: pass a traces file or directory (`kernel-code traces export -o`)")
    files = [path] if path.is_file() else _parquet_files(path)
    if not files:
        raise ConfigError(f"{path} has no traces (no .parquet files): write some with `kernel-code traces export`")
    return pa.concat_tables([_read_one(f) for f in files])


def _parquet_files(directory: Path) -> list[Path]:
    """The dataset's files, as Hive readers see them: hidden (``.``) and private (``_``) names skipped."""
    found = []
    for root, dirs, names in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
        found += [Path(root) / n for n in sorted(names) if n.endswith(".parquet") and not n.startswith((".", "_"))]
    return found


def _read_one(path: Path) -> pa.Table:
    try:
        table = pq.ParquetFile(path).read()
    except (OSError, pa.ArrowException) as err:
        raise ConfigError(f"{path} is not a readable Parquet file ({err}): remove it from the traces") from err
    if "schema_version" not in table.column_names:
        raise ConfigError(f"{path} is not a kernel-code trace (it has no schema_version column)")
    versions: list[int | None] = table.column("schema_version").to_pylist()
    newer = sorted({v for v in versions if v is not None and v > TRACE_SCHEMA_VERSION})
    if None in versions:
        raise ConfigError(f"{path} has a row without a schema_version: it was not written by kernel-code")
    if newer:
        raise ConfigError(
            f"{path} holds traces of schema_version {newer[-1]}: this kernel-code reads "
            f"{TRACE_SCHEMA_VERSION}; upgrade kernel-code"
        )
    try:
        return table.select(OPTIMIZATION_TRACE.names).cast(OPTIMIZATION_TRACE)
    except (KeyError, pa.ArrowException) as err:
        raise ConfigError(f"{path} does not have the trace schema ({err}): it was not written by kernel-code") from err


def _parquet_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression=COMPRESSION)
    data: bytes = sink.getvalue().to_pybytes()
    return data


def _write_atomic(path: Path, data: bytes) -> None:
    """Write next to the target under a hidden name (which readers skip), then rename over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
