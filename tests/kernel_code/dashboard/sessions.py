"""Sessions for the dashboard tests: recorded by the real loop into a real session directory (scripted
generator, evaluator and critic from tests/trace_sessions.py), and a deep profile in the shape
`kernel-code profile --json` writes."""

from __future__ import annotations

import json
from pathlib import Path

from openkernel.profile.ncu import KernelProfile, SourceLineCounters
from tests.trace_sessions import Step, record

# Six kernels: kept, faster kept, slower discarded, wrong, no reply, faster kept again; then two more timed.
STEPS = [
    Step("import torch\nBLOCK_SIZE = 256\nnum_warps = 4\n", "one row per program", runtime_ms=1.0),
    Step("import torch\nBLOCK_SIZE = 1024\nnum_warps = 8\n", "two rows per program", runtime_ms=0.5),
    Step("import torch\nBLOCK_SIZE = 64\nnum_warps = 2\n", "tiny blocks", runtime_ms=0.8),
    Step("import torch\nBLOCK_SIZE = 2048\n# online softmax\n", "online softmax", runtime_ms=None),
    Step(None, "", tokens=(900, 10)),
    Step("import torch\nBLOCK_SIZE = 4096\nnum_warps = 16\n", "vectorised loads", runtime_ms=0.4),
    Step("import torch\nBLOCK_SIZE = 512\nnum_warps = 4\n", "persistent rows", runtime_ms=0.6),
]


def recorded(path: Path, steps: list[Step] | None = None) -> Path:
    record(path, STEPS if steps is None else steps)
    return path


def kernel_profile() -> KernelProfile:
    lines = (
        SourceLineCounters("k.py", 10, "x = tl.load(ptr + offs)", 400, 90, 1024, 512, 512, 0, None, None),
        SourceLineCounters("k.py", 11, "m = tl.max(x, axis=0)", 200, 30, None, None, None, None, 64, 32),
        SourceLineCounters("k.py", 14, "tl.store(out + offs, y)", 100, 10, 256, 256, 0, 0, None, None),
    )
    return KernelProfile(
        kernel_name="softmax_kernel",
        launch_index=0,
        grid_size="(4096, 1, 1)",
        block_size="(128, 1, 1)",
        dram_throughput_pct=71.5,
        l2_hit_rate_pct=12.0,
        l1_hit_rate_pct=3.5,
        achieved_occupancy_pct=45.0,
        theoretical_occupancy_pct=50.0,
        sm_throughput_pct=22.0,
        tensor_pipe_active_pct=None,
        registers_per_thread=32,
        shared_bytes_per_block=4096,
        spill_bytes=0,
        duration_ms=0.4,
        dram_bytes=8_000_000,
        top_stalls=(("long_scoreboard", 40.0),),
        source_lines=lines,
    )


def write_profile(session: Path, iteration: int) -> Path:
    """``profiles/iter_NNNN.json`` as `kernel-code profile --json` prints it (the fields the dashboard reads)."""
    payload = {
        "available": True,
        "message": "profiled 1 kernel launch with ncu",
        "kernels": [kernel_profile().to_json()],
        "command": ["ncu"],
        "wall_seconds": 8.0,
        "analytic": None,
        "diagnosis": {},
    }
    path = session / "profiles" / f"iter_{iteration:04d}.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(payload))
    return path
