"""Proof that a candidate ran a custom kernel: Triton launches, or calls into a ``load_inline`` module.

Installed in the candidate worker before the candidate is imported. For the CUDA backend the same
place builds the extension: ``load_inline`` is intercepted (build directory keyed by the source
hash, a build timeout, compile-only with nvcc where torch has no CUDA), and every function of the
module it returns is wrapped to count calls.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

__all__ = ["LaunchCounter"]


class _CountingModule:
    """Stands in for a built extension module; counts each call of its functions."""

    def __init__(self, module: Any, counts: dict[str, int]) -> None:
        self._module = module
        self._counts = counts

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._module, name)
        if not callable(value) or name.startswith("__"):
            return value
        counts = self._counts
        label = f"{getattr(self._module, '__name__', 'extension')}.{name}"

        @functools.wraps(value)
        def counted(*args: Any, **kwargs: Any) -> Any:
            counts[label] = counts.get(label, 0) + 1
            return value(*args, **kwargs)

        return counted


class LaunchCounter:
    def __init__(self) -> None:
        from openkernel.evaluate.triton_launches import LaunchRecorder

        self._triton: Any = None
        self._recorder_cls = LaunchRecorder
        self._extension_calls: dict[str, int] = {}

    @contextmanager
    def building(self, cache_dir: Path, cuda_mode: str, build_timeout_s: float) -> Iterator[None]:
        """Active while the candidate is imported: install the Triton recorder, intercept load_inline."""
        try:
            import triton  # noqa: F401
        except ImportError:
            self._triton = None
        else:
            self._triton = self._recorder_cls().install()
        import torch.utils.cpp_extension as cpp_ext

        from openkernel.evaluate.cuda_build import intercept_load_inline

        with ExitStack() as stack:
            stack.enter_context(
                intercept_load_inline(cache_dir / "cuda_build", cuda_mode, build_timeout_s)  # type: ignore[arg-type]
            )
            intercepted: Callable[..., Any] = cpp_ext.load_inline

            @functools.wraps(intercepted)
            def counting_load_inline(*args: Any, **kwargs: Any) -> Any:
                return _CountingModule(intercepted(*args, **kwargs), self._extension_calls)

            cpp_ext.load_inline = counting_load_inline
            try:
                yield
            finally:
                cpp_ext.load_inline = intercepted

    def total(self) -> int:
        triton_total = int(self._triton.total) if self._triton is not None else 0
        return triton_total + sum(self._extension_calls.values())

    def counts(self) -> dict[str, int]:
        out = dict(self._triton.counts) if self._triton is not None else {}
        out.update(self._extension_calls)
        return out

    def intact(self) -> bool:
        return self._triton is None or not self._triton.installed or bool(self._triton.is_intact())

    def stop_recording(self) -> None:
        """Take the Triton recorder out before timing: its bookkeeping costs microseconds per launch."""
        if self._triton is not None and self._triton.installed:
            self._triton.uninstall()

    def compile_checks(self, arch: int = 90) -> list[dict[str, Any]]:
        """Compile every recorded Triton launch for a real GPU target (no GPU needed)."""
        if self._triton is None:
            return []
        return [dataclasses.asdict(report) for report in self._triton.compile_all(arch)]
