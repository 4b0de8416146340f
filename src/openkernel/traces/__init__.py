"""Traces: recorded sessions as structured, secret-free Parquet, for analysis and for training kernel models.

    schema   the OptimizationTrace / IterationTrace schema (pyarrow, nested, versioned)
    scrub    secrets out of free text (imported by the store too, so it has no dependencies)
    build    a session directory -> one trace row
    write    trace rows -> a dataset directory (one file per session) or one file; and reading them back
    stats    sessions, iterations, keep rate and speedups by hardware, backend and model
    sft      the best iterations as instruction -> kernel pairs (JSONL)

Import the modules themselves: this package imports nothing, so that the store can use ``scrub``
without pulling in pyarrow.
"""

from __future__ import annotations

__all__: list[str] = []
