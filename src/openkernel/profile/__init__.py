"""Profiles of a problem and a kernel: the roofline (FLOPs, minimal bytes, speed of light, bottleneck).

The counting runs where the reference model runs (the trusted reference worker); the analysis is
pure arithmetic on those counts and the ceilings of a GPU, so it works without one.
"""

from __future__ import annotations

from openkernel.profile.flops import FlopCount, FlopRule, count_flops
from openkernel.profile.roofline import (
    ACHIEVED_FRACTION_BOUND,
    LATENCY_BOUND_MS,
    Roofline,
    WorkCount,
    analyse,
    count_work,
    min_bytes,
)

__all__ = [
    "ACHIEVED_FRACTION_BOUND",
    "LATENCY_BOUND_MS",
    "FlopCount",
    "FlopRule",
    "Roofline",
    "WorkCount",
    "analyse",
    "count_flops",
    "count_work",
    "min_bytes",
]
