"""Trace rows -> Parquet -> read back by pandas, duckdb and our own reader: the same values, whole rows.
And the dataset directory: appending never rewrites another session's file."""

from __future__ import annotations

import datetime
import math
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from openkernel.errors import ConfigError
from openkernel.traces.build import TraceRow, build_trace
from openkernel.traces.write import read_traces, write_file, write_session
from tests.trace_sessions import STEPS, record

DAY = 86_400.0
T1 = 1_795_000_000.0  # 2026-11-18 UTC
T2 = T1 + 3 * DAY  # 2026-11-21 UTC


@pytest.fixture
def rows(tmp_path: Path) -> list[TraceRow]:
    """Two recorded sessions on two GPUs and days, as trace rows, sorted by session id."""
    record(tmp_path / "sessions" / "s1", STEPS, started_at_unix_s=T1)
    record(tmp_path / "sessions" / "s2", STEPS[1:3], started_at_unix_s=T2, model="anthropic:claude-test",
           hardware="NVIDIA A100-SXM4-80GB", hints=("use tl.max",))  # fmt: skip
    return [build_trace(tmp_path / "sessions" / name) for name in ("s1", "s2")]


def _plain(value: Any) -> Any:
    """What pandas hands back, as plain Python: arrays as lists, NaN and NA as None, numpy scalars unwrapped."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, np.ndarray | list):
        return [_plain(v) for v in value]
    if value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, np.generic):
        return value.item()
    return value


def _pandas_rows(path: Path) -> list[dict[str, Any]]:
    frame = pd.read_parquet(path).sort_values("session_id")
    return [_plain(row) for row in frame.to_dict("records")]


def _duckdb_rows(source: str) -> list[dict[str, Any]]:
    relation = duckdb.sql(f"SELECT * FROM read_parquet('{source}') ORDER BY session_id")
    return [dict(zip(relation.columns, values, strict=True)) for values in relation.fetchall()]


def test_a_dataset_reads_back_the_same_in_pandas_duckdb_and_ours(tmp_path: Path, rows: list[TraceRow]) -> None:
    dataset = tmp_path / "traces"
    written = [write_session(row, dataset) for row in rows]
    assert [(w.session_id, w.path.relative_to(dataset).as_posix(), w.action, w.iterations) for w in written] == [
        ("s1", "gpu=H200/date=2026-11-18/s1.parquet", "added", 4),
        ("s2", "gpu=A100-SXM4-80GB/date=2026-11-21/s2.parquet", "added", 2),
    ]
    # pandas and duckdb add the Hive partition columns; everything else is the rows as built
    partitions = [{"gpu": "H200", "date": "2026-11-18"}, {"gpu": "A100-SXM4-80GB", "date": "2026-11-21"}]
    assert _pandas_rows(dataset) == [{**row, **p} for row, p in zip(rows, partitions, strict=True)]
    dates = [{"gpu": p["gpu"], "date": datetime.date.fromisoformat(p["date"])} for p in partitions]
    assert _duckdb_rows(f"{dataset}/**/*.parquet") == [{**row, **d} for row, d in zip(rows, dates, strict=True)]
    assert sorted(read_traces(dataset).to_pylist(), key=lambda r: r["session_id"]) == rows


def test_a_single_file_reads_back_the_same(tmp_path: Path, rows: list[TraceRow]) -> None:
    path = write_file(rows, tmp_path / "all.parquet")
    assert _pandas_rows(path) == rows
    assert _duckdb_rows(str(path)) == rows
    assert read_traces(path).to_pylist() == rows
    metadata = pq.ParquetFile(path).metadata
    codecs = {metadata.row_group(0).column(i).compression for i in range(metadata.num_columns)}
    assert codecs == {"ZSTD"}


def test_appending_a_session_leaves_the_others_bytes_alone(tmp_path: Path, rows: list[TraceRow]) -> None:
    dataset = tmp_path / "traces"
    first = write_session(rows[0], dataset)
    before = first.path.read_bytes()
    second = write_session(rows[1], dataset)
    assert first.path.read_bytes() == before
    assert sorted(p.relative_to(dataset).as_posix() for p in dataset.rglob("*") if p.is_file()) == [
        "gpu=A100-SXM4-80GB/date=2026-11-21/s2.parquet",
        "gpu=H200/date=2026-11-18/s1.parquet",
    ]
    # the same session again: nothing to do; changed: only its own file is replaced
    assert write_session(rows[0], dataset).action == "unchanged"
    s2_bytes = second.path.read_bytes()
    changed = {**rows[0], "finish_reason": "stopped by the user"}
    again = write_session(changed, dataset)
    assert (again.action, again.path) == ("replaced", first.path)
    assert second.path.read_bytes() == s2_bytes
    assert read_traces(first.path).to_pylist() == [changed]
    # a session whose partition changed leaves no copy behind in the old one
    moved = write_session({**rows[0], "started_at_unix_s": T1 + DAY}, dataset)
    assert moved.action == "replaced"
    assert moved.path.relative_to(dataset).as_posix() == "gpu=H200/date=2026-11-19/s1.parquet"
    assert not first.path.exists()


def test_reading_what_is_not_traces_says_what_to_do(tmp_path: Path, rows: list[TraceRow]) -> None:
    def error(path: Path) -> str:
        with pytest.raises(ConfigError) as caught:
            read_traces(path)
        return str(caught.value)

    missing = tmp_path / "missing"
    assert error(missing) == (
        f"{missing} does not exist: pass a traces file or directory (`kernel-code traces export -o`)"
    )
    (tmp_path / "empty" / ".hidden").mkdir(parents=True)
    (tmp_path / "empty" / ".hidden" / "x.parquet").write_bytes(b"")
    assert error(tmp_path / "empty") == (
        f"{tmp_path / 'empty'} has no traces (no .parquet files): write some with `kernel-code traces export`"
    )
    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"x": [1]}), other)
    assert error(other) == f"{other} is not a kernel-code trace (it has no schema_version column)"
    newer = tmp_path / "newer.parquet"
    table = write_file(rows, tmp_path / "ok.parquet")
    pq.write_table(pq.read_table(table).set_column(0, "schema_version", pa.array([1, 2], pa.int32())), newer)
    assert error(newer) == f"{newer} holds traces of schema_version 2: this kernel-code reads 1; upgrade kernel-code"
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"not parquet at all")
    assert error(broken).startswith(f"{broken} is not a readable Parquet file (")
    assert error(broken).endswith("): remove it from the traces")
