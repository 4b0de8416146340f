"""Shared test helpers: where things are, and whether a GPU is here."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "tests" / "kernels"
SOLUTIONS = ROOT / "tests" / "solutions"
HAS_GPU = torch.cuda.is_available()

needs_gpu = pytest.mark.skipif(not HAS_GPU, reason="needs a CUDA GPU")
