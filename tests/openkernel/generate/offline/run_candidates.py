"""Runs candidate files against their references in the Triton interpreter; prints one JSON verdict per pair.

Usage: python run_candidates.py REFERENCE CANDIDATE [REFERENCE CANDIDATE ...]. A separate process, so
TRITON_INTERPRET=1 is set before triton is imported, and the interpreter's numpy warnings (masked
lanes divide by zero) stay out of the test process. Sizes: the reference's SMALL_SIZES.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import warnings

os.environ["TRITON_INTERPRET"] = "1"
warnings.simplefilter("ignore")

import torch  # noqa: E402

TOLERANCE = {torch.float32: 1e-4, torch.float16: 5e-3, torch.bfloat16: 2e-2}


def load(path: str, name: str) -> object:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def verdict(reference_path: str, candidate_path: str) -> str:
    ref = load(reference_path, "reference")
    for key, value in getattr(ref, "SMALL_SIZES", {}).items():
        setattr(ref, key, value)
    cand = load(candidate_path, "candidate")
    torch.manual_seed(0)
    model = ref.Model(*ref.get_init_inputs())  # type: ignore[attr-defined]
    torch.manual_seed(1)
    new = cand.ModelNew(*ref.get_init_inputs())  # type: ignore[attr-defined]
    new.load_state_dict(model.state_dict())
    torch.manual_seed(2)
    inputs = ref.get_inputs()  # type: ignore[attr-defined]
    with torch.no_grad():
        expected = model(*inputs)
        got = new(*[t.clone() if isinstance(t, torch.Tensor) else t for t in inputs])
    if got.shape != expected.shape or got.dtype != expected.dtype:
        return f"shape/dtype {tuple(got.shape)} {got.dtype} != {tuple(expected.shape)} {expected.dtype}"
    tol = TOLERANCE.get(expected.dtype, 0.0)
    if not torch.allclose(got.double(), expected.double(), atol=tol, rtol=tol):
        return f"mismatch: max abs error {(got.double() - expected.double()).abs().max().item():.3g}"
    return "ok"


if __name__ == "__main__":
    pairs = sys.argv[1:]
    print(json.dumps([verdict(pairs[i], pairs[i + 1]) for i in range(0, len(pairs), 2)]))
