"""Quick GPU check of the offline generator's kernels at full size: right answers, and how fast.

Outside the evaluator (no isolation, no L2 flush): for each covered bundled problem, each listed
launch configuration is emitted, run against the reference (tolerance by dtype, the problem's own
ATOL/RTOL when it sets them) and timed with ``triton.testing.do_bench``; eager PyTorch is timed the
same way. Memory-bound rows report the bandwidth of their minimal traffic (inputs, parameters and
output, each once). The evaluator's numbers (``kernel-code optimize``) are the ones to report;
this is the fast look that fits one device call.

    PYTHONPATH=src python3 bench/offline_quick.py [--problems softmax_fp32,...] [--device cpu]
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import types
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from openkernel.generate.offline import recognise_source  # noqa: E402
from openkernel.generate.offline.configs import Config, default_config, family_of  # noqa: E402
from openkernel.generate.offline.emit import emit_candidate  # noqa: E402
from openkernel.problems.loader import bundled_dir  # noqa: E402

TOLERANCE = {torch.float32: 1e-4, torch.float16: 5e-3, torch.bfloat16: 2e-2}
# Family -> alternative tags tried after the default (what the exploration reaches first).
ALTERNATIVES = {
    "row": [
        "variant=one_pass BLOCK=auto warps=16 ROWS=1 persistent=no",
        "variant=one_pass BLOCK=auto warps=auto ROWS=1 persistent=yes",
        "variant=looped BLOCK=4096 warps=8 ROWS=1 persistent=no",
    ],
    "pointwise": ["BLOCK=2048 warps=8", "BLOCK=8192 warps=16"],
    "tiled": ["BLOCK=2048 ROWS=2 warps=8", "BLOCK=1024 ROWS=4 warps=8"],
    "matmul": [
        "BLOCK_M=128 BLOCK_N=128 BLOCK_K=64 warps=8 stages=4 GROUP_M=8",
    ],
}


def load(path: Path, name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def bench(fn: object, device: str) -> float:
    if device == "cpu":
        import time

        start = time.perf_counter()
        fn()  # type: ignore[operator]
        return 1e3 * (time.perf_counter() - start)
    from triton.testing import do_bench

    return float(do_bench(fn, warmup=10, rep=100))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--problems", default="")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--defaults-only", action="store_true")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    names = args.problems.split(",") if args.problems else sorted(p.stem for p in bundled_dir().glob("[a-z]*.py"))
    tmp = Path(tempfile.mkdtemp(prefix="offline-quick-"))
    print(f"{'problem':24} {'config':64} {'check':10} {'ours ms':>9} {'eager ms':>9} {'x eager':>8} {'GB/s':>7}")
    for name in names:
        run_problem(name, args.device, args.defaults_only, tmp)
        if args.device == "cuda":
            torch.cuda.empty_cache()


def run_problem(name: str, device: str, defaults_only: bool, tmp: Path) -> None:
    """One table row per configuration of ``name`` (or the reason no template covers it)."""
    source = (bundled_dir() / f"{name}.py").read_text()
    found = recognise_source(source)
    if found.plan is None or found.trace is None:
        print(f"{name:24} {found.reason}")
        return
    plan, family = found.plan, family_of(found.plan)
    configs = [default_config(plan)]
    if not defaults_only:
        configs += [c for t in ALTERNATIVES[family] if (c := Config.parse(family, t)) is not None]
    ref = load(bundled_dir() / f"{name}.py", f"ref_{name}")
    if device == "cpu":
        for key, value in getattr(ref, "SMALL_SIZES", {}).items():
            setattr(ref, key, value)
    with torch.device(device):
        torch.manual_seed(0)
        model = ref.Model(*ref.get_init_inputs())
        torch.manual_seed(1)
        inputs = ref.get_inputs()
    with torch.no_grad():
        expected = model(*inputs)
        eager_ms = bench(lambda: model(*inputs), device)
    moved = sum(t.numel() * t.element_size() for t in [*inputs, expected, *model.state_dict().values()])
    atol = getattr(ref, "ATOL", TOLERANCE.get(expected.dtype, 0.0))
    rtol = getattr(ref, "RTOL", TOLERANCE.get(expected.dtype, 0.0))
    for i, config in enumerate(configs):
        path = tmp / f"{name}_{i}.py"
        try:
            path.write_text(emit_candidate(plan, config, found.trace, source, ()))
            cand = load(path, f"cand_{name}_{i}")
            new = cand.ModelNew(*ref.get_init_inputs()).to(device)
            new.load_state_dict(model.state_dict())
            with torch.no_grad():
                got = new(*inputs)
                ok = torch.allclose(got.double(), expected.double(), atol=atol, rtol=rtol)
                ms = bench(lambda new=new: new(*inputs), device)
        except Exception as err:  # a failing config is a row of the table
            print(f"{name:24} {config.tag():64} {type(err).__name__}: {str(err).splitlines()[0][:80]}")
            continue
        check = "ok" if ok else f"BAD {(got.double() - expected.double()).abs().max().item():.2g}"
        gbps = moved / ms / 1e6
        print(f"{name:24} {config.tag():64} {check:10} {ms:9.4f} {eager_ms:9.4f} {eager_ms / ms:8.2f} {gbps:7.0f}")


if __name__ == "__main__":
    main()
