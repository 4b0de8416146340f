"""The skill library: optimisation techniques as data files, and the matcher that ranks them for a kernel."""

from __future__ import annotations

from openkernel.skills.library import BACKENDS, BOTTLENECKS, DATA_DIR, OP_CLASSES, SIGNALS, Skill, load_skills
from openkernel.skills.matcher import MatchQuery, SkillMatch, match_skills, parse_match_spec, prompt_section

__all__ = [
    "BACKENDS",
    "BOTTLENECKS",
    "DATA_DIR",
    "OP_CLASSES",
    "SIGNALS",
    "MatchQuery",
    "Skill",
    "SkillMatch",
    "load_skills",
    "match_skills",
    "parse_match_spec",
    "prompt_section",
]
