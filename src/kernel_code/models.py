"""``--model`` and ``--critic``: the builders live in the engine (``openkernel.generate.models``), so that
a sweep's Ray task builds its generator as the command line does; this module keeps the old import path."""

from __future__ import annotations

from openkernel.generate.models import CRITIC_HELP, MODEL_HELP, ModelRequest, make_critic, make_generator

__all__ = ["CRITIC_HELP", "MODEL_HELP", "ModelRequest", "make_critic", "make_generator"]
