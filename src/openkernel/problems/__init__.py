"""Problems: the KernelBench file contract, the bundled problem set, and KernelBench checkouts.

The trusted parent only *reads* problem files (with ``ast``) to check the contract and find the
sizes; the code in them runs in worker processes (see ``openkernel.evaluate``).
"""

from __future__ import annotations

from openkernel.problems.loader import (
    bundled_dir,
    bundled_names,
    load_kernelbench_level,
    load_problem,
    load_problems,
    parse_kernelbench_id,
    parse_kernelbench_level,
    resolve_problems,
)

__all__ = [
    "bundled_dir",
    "bundled_names",
    "load_kernelbench_level",
    "load_problem",
    "load_problems",
    "parse_kernelbench_id",
    "parse_kernelbench_level",
    "resolve_problems",
]
