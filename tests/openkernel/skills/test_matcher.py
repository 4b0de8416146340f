"""The matcher: transparent scores, exclusions by hardware, backend and op class, and the --match spec."""

from __future__ import annotations

import pytest

from openkernel.skills import MatchQuery, Skill, SkillMatch, match_skills, parse_match_spec, prompt_section


def _skill(
    skill_id: str,
    *,
    bottlenecks: tuple[str, ...] = ("memory_bound",),
    op_classes: tuple[str, ...] = ("any",),
    signals: tuple[str, ...] = (),
    hardware: tuple[str, ...] = ("any",),
    backends: tuple[str, ...] = ("triton",),
) -> Skill:
    return Skill(
        id=skill_id,
        title=skill_id.title(),
        summary="s.",
        what=f"{skill_id} what",
        why=f"{skill_id} why",
        typical_effect="2x",
        bottlenecks=bottlenecks,
        op_classes=op_classes,
        signals=signals,
        hardware=hardware,
        backends=backends,
        triton_example="pass\n" if "triton" in backends else None,
        cuda_example="__global__ void k() {}\n" if "cuda" in backends else None,
    )


def _ranked(matches: list[SkillMatch]) -> list[tuple[str, float, tuple[str, ...]]]:
    return [(m.skill.id, m.score, m.because) for m in matches]


def _top(spec: str, limit: int = 5) -> list[tuple[str, float, tuple[str, ...]]]:
    return _ranked(match_skills(parse_match_spec(spec), limit=limit))


# --- the scoring rule, on constructed skills -------------------------------------------------------

TOY = (
    _skill("aaa-any"),
    _skill("bbb-softmax", op_classes=("softmax", "norm"), signals=("long_rows", "low_l2_hit")),
    _skill("ccc-matmul", bottlenecks=("compute_bound",), op_classes=("matmul",)),
    _skill("ddd-hopper", op_classes=("softmax",), hardware=("sm_90",), backends=("cuda",)),
)


def test_weights_add_up_and_name_their_reasons() -> None:
    query = MatchQuery(op_classes=("softmax",), bottleneck="memory_bound", signals=("long_rows", "low_l2_hit"))
    assert _ranked(match_skills(query, TOY)) == [
        ("bbb-softmax", 9.0, ("bottleneck memory_bound", "signal long_rows", "signal low_l2_hit", "op class softmax")),
        ("ddd-hopper", 5.0, ("bottleneck memory_bound", "op class softmax")),
        ("aaa-any", 4.0, ("bottleneck memory_bound", "op class any")),
    ]


def test_each_named_op_class_counts_and_any_counts_once() -> None:
    query = MatchQuery(op_classes=("softmax", "norm"))
    assert _ranked(match_skills(query, TOY)) == [
        ("bbb-softmax", 4.0, ("op class softmax", "op class norm")),
        ("ddd-hopper", 2.0, ("op class softmax",)),
        ("aaa-any", 1.0, ("op class any",)),
    ]


def test_op_class_mismatch_excludes_even_with_a_bottleneck_match() -> None:
    query = MatchQuery(op_classes=("matmul",), bottleneck="memory_bound")
    assert _ranked(match_skills(query, TOY)) == [
        ("aaa-any", 4.0, ("bottleneck memory_bound", "op class any")),
        ("ccc-matmul", 2.0, ("op class matmul",)),
    ]


def test_ties_break_by_id_and_zero_scores_are_dropped() -> None:
    query = MatchQuery(bottleneck="memory_bound")
    assert [m.skill.id for m in match_skills(query, TOY)] == ["aaa-any", "bbb-softmax", "ddd-hopper"]
    assert match_skills(MatchQuery(), TOY) == []
    assert match_skills(MatchQuery(signals=("bank_conflicts",)), TOY) == []


def test_hardware_excludes_only_skills_for_other_gpus() -> None:
    query = MatchQuery(bottleneck="memory_bound")
    ids = {
        hw: [m.skill.id for m in match_skills(MatchQuery(bottleneck="memory_bound", hardware=hw), TOY)]
        for hw in ("sm_80", "sm_90", "sm_90a")
    }
    assert ids == {
        "sm_80": ["aaa-any", "bbb-softmax"],
        "sm_90": ["aaa-any", "bbb-softmax", "ddd-hopper"],
        "sm_90a": ["aaa-any", "bbb-softmax", "ddd-hopper"],
    }
    assert [m.skill.id for m in match_skills(query, TOY)] == ["aaa-any", "bbb-softmax", "ddd-hopper"]


def test_backend_excludes_skills_without_an_example_in_it() -> None:
    assert [m.skill.id for m in match_skills(MatchQuery(bottleneck="memory_bound", backend="cuda"), TOY)] == [
        "ddd-hopper"
    ]
    assert [m.skill.id for m in match_skills(MatchQuery(bottleneck="memory_bound", backend="triton"), TOY)] == [
        "aaa-any",
        "bbb-softmax",
    ]


def test_limit_cuts_the_ranking() -> None:
    query = MatchQuery(bottleneck="memory_bound")
    assert [m.skill.id for m in match_skills(query, TOY, limit=1)] == ["aaa-any"]


# --- rankings over the shipped library -------------------------------------------------------------


def test_long_softmax_rows_that_are_memory_bound() -> None:
    assert _top("memory_bound,softmax,long_rows") == [
        ("online-softmax", 7.0, ("bottleneck memory_bound", "signal long_rows", "op class softmax")),
        ("single-pass-reduction", 7.0, ("bottleneck memory_bound", "signal long_rows", "op class softmax")),
        ("avoid-wrapper-copies", 5.0, ("bottleneck memory_bound", "op class softmax")),
        ("mixed-precision-accumulate", 5.0, ("bottleneck memory_bound", "op class softmax")),
        ("recompute-vs-store", 5.0, ("bottleneck memory_bound", "op class softmax")),
    ]


def test_long_norm_rows_bring_welford() -> None:
    assert [skill_id for skill_id, _, _ in _top("memory_bound,norm,long_rows", limit=3)] == [
        "single-pass-reduction",
        "welford",
        "avoid-wrapper-copies",
    ]


def test_compute_bound_matmul_on_ampere_excludes_hopper_skills() -> None:
    because = ("bottleneck compute_bound", "signal low_tensor_pipe", "op class matmul")
    assert _top("compute_bound,matmul,low_tensor_pipe,sm_80", limit=4) == [
        ("tensor-core-dot", 7.0, because),
        ("tiling-block-shapes", 7.0, because),
        ("bank-conflict-padding", 5.0, ("bottleneck compute_bound", "op class matmul")),
        ("l2-swizzled-tile-order", 5.0, ("bottleneck compute_bound", "op class matmul")),
    ]
    every = match_skills(parse_match_spec("compute_bound,matmul,low_tensor_pipe,sm_80"), limit=100)
    assert {"hopper-tma", "hopper-wgmma", "warp-specialisation"} & {m.skill.id for m in every} == set()


def test_compute_bound_matmul_on_hopper_brings_wgmma_and_warp_specialisation() -> None:
    because = ("bottleneck compute_bound", "signal low_tensor_pipe", "op class matmul")
    assert _top("compute_bound,matmul,low_tensor_pipe,sm_90") == [
        ("hopper-wgmma", 7.0, because),
        ("tensor-core-dot", 7.0, because),
        ("tiling-block-shapes", 7.0, because),
        ("warp-specialisation", 7.0, because),
        ("bank-conflict-padding", 5.0, ("bottleneck compute_bound", "op class matmul")),
    ]


def test_small_skinny_matmul_that_leaves_sms_idle() -> None:
    because = ("bottleneck under_utilised", "signal small_problem", "signal tail_effect", "op class matmul")
    assert _top("under_utilised,matmul,small_problem,tail_effect") == [
        ("atomics", 9.0, because),
        ("persistent-kernels", 9.0, because),
        ("split-k", 9.0, because),
        ("stream-k", 9.0, because),
        ("block-size-autotuning", 6.0, ("bottleneck under_utilised", "signal tail_effect", "op class any")),
    ]


def test_many_small_launches() -> None:
    because = ("bottleneck latency_bound", "signal many_launches", "op class any")
    assert _top("latency_bound,elementwise,many_launches", limit=3) == [
        ("avoid-host-overhead", 6.0, because),
        ("cuda-graphs", 6.0, because),
        ("kernel-fusion", 6.0, because),
    ]


def test_uncoalesced_elementwise_in_cuda() -> None:
    assert _top("memory_bound,elementwise,uncoalesced,cuda", limit=3) == [
        ("shared-memory-staging", 7.0, ("bottleneck memory_bound", "signal uncoalesced", "op class elementwise")),
        ("memory-coalescing", 6.0, ("bottleneck memory_bound", "signal uncoalesced", "op class any")),
        ("elements-per-thread", 5.0, ("bottleneck memory_bound", "op class elementwise")),
    ]


def test_barrier_stalls_in_a_cuda_reduction() -> None:
    because = ("bottleneck latency_bound", "signal high_stall_barrier", "op class reduction")
    assert _top("latency_bound,reduction,high_stall_barrier,cuda", limit=2) == [
        ("bank-conflict-padding", 7.0, because),
        ("warp-shuffle-reduction", 7.0, because),
    ]


# --- the --match spec ------------------------------------------------------------------------------


def test_spec_words_are_sorted_into_fields_by_vocabulary() -> None:
    assert parse_match_spec(" memory_bound, softmax norm,long_rows,low_l2_hit,sm_90,triton,softmax ") == MatchQuery(
        op_classes=("softmax", "norm"),
        bottleneck="memory_bound",
        signals=("long_rows", "low_l2_hit"),
        hardware="sm_90",
        backend="triton",
    )
    assert parse_match_spec("bank_conflicts") == MatchQuery(signals=("bank_conflicts",))
    assert parse_match_spec("sm_100a") == MatchQuery(hardware="sm_100a")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "empty match spec: name words such as memory_bound,softmax,low_l2_hit"),
        (" , ", "empty match spec: name words such as memory_bound,softmax,low_l2_hit"),
        ("memory_bound,compute_bound", "match spec names two bottlenecks (memory_bound and compute_bound): keep one"),
        ("triton,cuda", "match spec names two backends (triton and cuda): keep one"),
        ("sm_80,sm_90", "match spec names two hardware targets (sm_80 and sm_90): keep one"),
        ("any", "op class 'any' is not a query: leave the op class out to match every op class"),
    ],
)
def test_bad_specs_say_how_to_fix_them(spec: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_match_spec(spec)
    assert str(caught.value) == message


def test_an_unknown_word_suggests_the_closest_and_lists_the_vocabulary() -> None:
    with pytest.raises(ValueError) as caught:
        parse_match_spec("memory_bound,low_l2")
    message = str(caught.value)
    assert message.startswith("unknown word 'low_l2' in match spec: did you mean low_l2_hit? use bottlenecks (")
    assert message.endswith("hardware like sm_90, or backend triton/cuda; e.g. memory_bound,softmax,low_l2_hit")
    assert "\n" not in message
    with pytest.raises(ValueError, match=r"^unknown word 'zzz' in match spec: use bottlenecks \("):
        parse_match_spec("zzz")


# --- what generators put in their prompts ----------------------------------------------------------


def test_prompt_section_lists_reasons_and_the_backend_example() -> None:
    matches = match_skills(MatchQuery(op_classes=("softmax",), signals=("long_rows",)), TOY)
    assert prompt_section(matches[:1], backend="triton") == (
        "1. Bbb-Softmax [bbb-softmax] (matched: signal long_rows, op class softmax)\n"
        "   What: bbb-softmax what\n"
        "   Why: bbb-softmax why\n"
        "   Typical effect: 2x\n"
        "   Example (triton):\n```\npass\n```"
    )
    assert prompt_section(matches[:1], backend="cuda") == (
        "1. Bbb-Softmax [bbb-softmax] (matched: signal long_rows, op class softmax)\n"
        "   What: bbb-softmax what\n"
        "   Why: bbb-softmax why\n"
        "   Typical effect: 2x"
    )
    assert prompt_section([]) == ""
