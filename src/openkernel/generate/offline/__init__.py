"""The offline generator: real Triton kernels without an LLM (trace -> patterns -> templates -> search).

``trace.py`` records the reference's ATen ops on the meta device; ``patterns.py`` (with ``lower.py``,
``aten_ops.py`` and ``graph.py``) recognises the template that covers them and what to fuse;
``templates.py``, ``looped.py``, ``matmul.py`` and ``emit.py`` write the candidate file;
``configs.py`` and ``explore.py`` choose each iteration's launch configuration; ``generator.py``
ties them into the :class:`~openkernel.generate.base.Generator` seam.
"""

from __future__ import annotations

from openkernel.generate.offline.generator import OfflineGenerator, Recognised, recognise_source

__all__ = ["OfflineGenerator", "Recognised", "recognise_source"]
