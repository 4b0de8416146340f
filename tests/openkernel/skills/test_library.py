"""The skill library's data files: all load, cover the techniques the issue names, and bad files fail clearly."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from openkernel import ConfigError
from openkernel.skills import BOTTLENECKS, DATA_DIR, OP_CLASSES, SIGNALS, Skill, load_skills

# One file per technique named in the issue, under the id we gave it.
REQUIRED_IDS = {
    "memory-coalescing",
    "vectorised-loads",
    "kernel-fusion",
    "tiling-block-shapes",
    "occupancy-vs-registers",
    "shared-memory-staging",
    "bank-conflict-padding",
    "persistent-kernels",
    "split-k",
    "online-softmax",
    "welford",
    "software-pipelining",
    "tensor-core-dot",
    "l2-swizzled-tile-order",
    "cuda-graphs",
    "atomics",
    "hopper-tma",
    "hopper-wgmma",
    "warp-specialisation",
}

# The rest: techniques we judged useful beyond the list.
EXTRA_IDS = {
    "avoid-host-overhead",
    "avoid-wrapper-copies",
    "block-size-autotuning",
    "cache-eviction-hints",
    "constexpr-specialisation",
    "contiguous-layout",
    "elements-per-thread",
    "epilogue-fusion",
    "fast-math-intrinsics",
    "flash-attention",
    "grid-stride-loops",
    "implicit-gemm-conv",
    "mixed-precision-accumulate",
    "multi-row-per-program",
    "recompute-vs-store",
    "single-pass-reduction",
    "skip-masked-blocks",
    "stream-k",
    "warp-shuffle-reduction",
}

VALID = """\
id = "{id}"
title = "A technique"
summary = "One sentence."
what = "What it does."
why = "Why it helps."
typical_effect = "1.2x"

[applies]
bottlenecks = ["memory_bound"]
op_classes = ["softmax"]
signals = ["long_rows"]
hardware = ["any"]
backends = ["triton"]

[example]
triton = '''
x = 1
'''
"""


def test_every_data_file_loads_as_one_skill_sorted_by_id() -> None:
    skills = load_skills()
    stems = sorted(p.stem for p in DATA_DIR.glob("*.toml"))
    assert [s.id for s in skills] == stems
    assert len(skills) >= 32


def test_the_library_is_exactly_the_required_and_extra_techniques() -> None:
    ids = {s.id for s in load_skills()}
    assert ids >= REQUIRED_IDS
    assert ids == REQUIRED_IDS | EXTRA_IDS
    assert len(ids) == len(load_skills())  # unique


def test_vocabulary_is_closed_and_fully_used() -> None:
    skills = load_skills()
    used_signals = {sig for s in skills for sig in s.signals}
    used_bottlenecks = {b for s in skills for b in s.bottlenecks}
    used_op_classes = {c for s in skills for c in s.op_classes}
    assert used_signals == set(SIGNALS)
    assert used_bottlenecks == set(BOTTLENECKS)
    assert used_op_classes == set(OP_CLASSES)
    assert {b for s in skills for b in s.backends} == {"triton", "cuda"}


def test_only_the_hopper_techniques_name_hardware() -> None:
    named = {s.id: s.hardware for s in load_skills() if s.hardware != ("any",)}
    assert named == {
        "hopper-tma": ("sm_90", "sm_100"),
        "hopper-wgmma": ("sm_90",),
        "warp-specialisation": ("sm_90", "sm_100"),
    }


def test_loading_is_cached_per_directory() -> None:
    assert load_skills() is load_skills()
    assert load_skills(DATA_DIR) is load_skills()


def test_online_softmax_loads_whole() -> None:
    skill = next(s for s in load_skills() if s.id == "online-softmax")
    assert dataclasses.replace(skill, what="", why="", triton_example=None) == Skill(
        id="online-softmax",
        title="Online softmax (running max and rescaled sum)",
        summary=(
            "Compute the row maximum and the normaliser in one streaming pass by rescaling the running sum "
            "whenever the maximum grows."
        ),
        what="",
        why="",
        typical_effect="removes one full read of the input: up to 1.5x on rows too long to keep in registers",
        bottlenecks=("memory_bound",),
        op_classes=("softmax", "attention"),
        signals=("long_rows", "low_dram_throughput"),
        hardware=("any",),
        backends=("triton",),
        triton_example=None,
        cuda_example=None,
    )
    assert skill.triton_example is not None
    assert skill.triton_example.startswith("import triton\n")
    assert skill.triton_example.endswith("mask=cols < n_cols)\n")


TRITON_EXAMPLES = {s.id: s.triton_example for s in load_skills() if s.triton_example is not None}
CUDA_EXAMPLES = {s.id: s.cuda_example for s in load_skills() if s.cuda_example is not None}


def test_every_backend_listed_has_its_example() -> None:
    skills = load_skills()
    assert set(TRITON_EXAMPLES) == {s.id for s in skills if "triton" in s.backends}
    assert set(CUDA_EXAMPLES) == {s.id for s in skills if "cuda" in s.backends}


@pytest.mark.parametrize("code", TRITON_EXAMPLES.values(), ids=TRITON_EXAMPLES.keys())
def test_triton_examples_parse_as_python(code: str) -> None:
    ast.parse(code)
    assert "import torch" in code or "import triton" in code


@pytest.mark.parametrize("code", CUDA_EXAMPLES.values(), ids=CUDA_EXAMPLES.keys())
def test_cuda_examples_are_balanced_and_define_gpu_code(code: str) -> None:
    assert (code.count("{"), code.count("(")) == (code.count("}"), code.count(")"))
    assert "__global__" in code or "__device__" in code


@pytest.mark.parametrize("skill", load_skills(), ids=lambda s: s.id)
def test_prose_fields_are_single_paragraphs(skill: Skill) -> None:
    for text in (skill.title, skill.summary, skill.what, skill.why, skill.typical_effect):
        assert "\n" not in text
        assert "  " not in text
    assert skill.summary.endswith(".")


def _write(tmp_path: Path, text: str, stem: str = "demo") -> Path:
    path = tmp_path / f"{stem}.toml"
    path.write_text(text)
    return path


def test_a_valid_minimal_file_loads(tmp_path: Path) -> None:
    _write(tmp_path, VALID.format(id="demo"))
    assert load_skills(tmp_path) == (
        Skill(
            id="demo",
            title="A technique",
            summary="One sentence.",
            what="What it does.",
            why="Why it helps.",
            typical_effect="1.2x",
            bottlenecks=("memory_bound",),
            op_classes=("softmax",),
            signals=("long_rows",),
            hardware=("any",),
            backends=("triton",),
            triton_example="x = 1\n",
            cuda_example=None,
        ),
    )


BAD_FILES = [
    pytest.param(
        ('signals = ["long_rows"]', 'signals = ["long_row"]'),
        "field 'applies.signals' has unknown value 'long_row' (known: " + ", ".join(SIGNALS) + ")",
        id="unknown-signal",
    ),
    pytest.param(
        ('bottlenecks = ["memory_bound"]', 'bottlenecks = ["memory"]'),
        "field 'applies.bottlenecks' has unknown value 'memory' (known: " + ", ".join(BOTTLENECKS) + ")",
        id="unknown-bottleneck",
    ),
    pytest.param(
        ('op_classes = ["softmax"]', 'op_classes = ["softmax", "any"]'),
        "field 'applies.op_classes' lists 'any' with other classes; use 'any' alone",
        id="any-with-others",
    ),
    pytest.param(
        ('id = "demo"', 'id = "other"'),
        "field 'id' is 'other' but must be lowercase-hyphen and equal the file name 'demo'",
        id="id-not-stem",
    ),
    pytest.param(
        ('why = "Why it helps."\n', ""),
        "field 'why' is missing",
        id="missing-why",
    ),
    pytest.param(
        ('title = "A technique"', 'title = "A technique"\nauthor = "me"'),
        "field 'author' is not a known field "
        "(allowed: id, title, summary, what, why, typical_effect, applies, example)",
        id="unknown-field",
    ),
    pytest.param(
        ('summary = "One sentence."', "summary = 3"),
        "field 'summary' must be a non-empty string",
        id="summary-not-string",
    ),
    pytest.param(
        ('hardware = ["any"]', 'hardware = ["hopper"]'),
        "field 'applies.hardware' is ['hopper'] but must be ['any'] or compute capabilities like 'sm_90'",
        id="bad-hardware",
    ),
    pytest.param(
        ('backends = ["triton"]', 'backends = ["triton", "cuda"]'),
        "field 'applies.backends' is ['triton', 'cuda'] but the examples cover ['triton']",
        id="backend-without-example",
    ),
    pytest.param(
        ("triton = '''\nx = 1\n'''", ""),
        "field 'example.triton' is missing: give a triton or a cuda example (or both)",
        id="no-example",
    ),
    pytest.param(
        ("[example]", "[example]\nrust = 'fn main() {}'"),
        "field 'example.rust' is not a known field (allowed: triton, cuda)",
        id="unknown-example-language",
    ),
    pytest.param(
        ('signals = ["long_rows"]', "signals = []\nsignals = []"),
        "not valid TOML",
        id="bad-toml",
    ),
]


@pytest.mark.parametrize(("edit", "message"), BAD_FILES)
def test_a_bad_file_names_the_file_and_the_field(tmp_path: Path, edit: tuple[str, str], message: str) -> None:
    old, new = edit
    text = VALID.format(id="demo")
    assert old in text
    path = _write(tmp_path, text.replace(old, new, 1))
    with pytest.raises(ConfigError) as caught:
        load_skills(tmp_path)
    assert str(caught.value).startswith(f"skill file {path.resolve()}: {message}")


def test_an_empty_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_skills(tmp_path)
    message = f"no skill files (*.toml) in {tmp_path.resolve()}: point at the skills data folder"
    assert str(caught.value) == message
