"""Generators: propose the next kernel (LLM, offline templates, the human editing a file, replay)."""

from __future__ import annotations

from openkernel.generate.base import Context, Generator, PastResult, Proposal, ScriptedGenerator, Usage

__all__ = ["Context", "Generator", "PastResult", "Proposal", "ScriptedGenerator", "Usage"]
