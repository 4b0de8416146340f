"""The offline generator across iterations: first guess, guided moves, no repeats, failures, exhaustion."""

from __future__ import annotations

import re

from openkernel.generate.base import Context, PastResult, Proposal
from openkernel.generate.offline import OfflineGenerator, recognise_source
from openkernel.generate.offline.configs import space
from openkernel.generate.offline.emit import TRIED_MARK
from openkernel.problems.loader import bundled_dir

SOFTMAX = (bundled_dir() / "softmax_fp32.py").read_text()
SWISH = (bundled_dir() / "swish_residual_fp16.py").read_text()
MATMUL = (bundled_dir() / "matmul_bf16.py").read_text()
MEMORY_BOUND = (
    "Bottleneck memory_bound at 72% of the memory ceiling (~1.4x headroom). Next: close the bandwidth gap.\n"
    "Bottleneck: memory_bound · Bandwidth: 72% of peak · L2 hit: 40% (poor) · Occupancy: 0.61 · Headroom: ~1.4x\n"
    "1. Close the bandwidth gap: 72% of peak bandwidth, ~1.4x headroom: memory_bound: 0.1866 ms against ..."
)
COMPUTE_BOUND = (
    "Bottleneck: compute_bound · Compute: 60% of peak · L2 hit: 90% (good) · Occupancy: 0.20 · Headroom: ~1.7x\n"
    "1. Close the compute gap: 60% of the bf16 tensor peak, ~1.7x headroom: compute_bound: ..."
)
ROW_FIRST = "variant=one_pass BLOCK=auto warps=auto ROWS=1 persistent=no evict=none"


def context(
    source: str,
    iteration: int = 0,
    history: tuple[PastResult, ...] = (),
    best: str | None = None,
    diagnosis: str | None = None,
    hints: tuple[str, ...] = (),
    backend: str = "triton",
) -> Context:
    return Context(iteration, "p", source, backend, best, 1.2 if best else None, history, diagnosis, None, hints, None)


def tag(proposal: Proposal) -> str:
    match = re.search(r"\[(\w+ [^\]]+)\]$", proposal.intent)
    assert match is not None, proposal.intent
    return match.group(1)


def test_iteration_zero_is_the_best_guess_and_names_it() -> None:
    first = OfflineGenerator().propose(context(SOFTMAX))
    assert first.error is None and first.source is not None
    assert (
        first.intent == f"softmax template, best guess: one row per program in registers, warps auto [row {ROW_FIRST}]"
    )
    assert (
        first.text.splitlines()[0] == "offline generator: softmax template over [16384x4096] (traced at the full size)"
    )


def test_memory_bound_diagnosis_moves_to_more_warps_then_cache_hints_and_the_intent_names_the_change() -> None:
    first = OfflineGenerator().propose(context(SOFTMAX))
    history = (PastResult(0, first.intent, "correct", 1.5, ()),)
    second = OfflineGenerator().propose(context(SOFTMAX, 1, history, first.source, MEMORY_BOUND))
    assert second.intent == (
        "warps 8 -> 16 (memory_bound: more warps keep more loads in flight) "
        f"[row {ROW_FIRST.replace('warps=auto', 'warps=16')}]"
    )
    assert second.source is not None and "num_warps = 16" in second.source
    assert f"{TRIED_MARK} {ROW_FIRST}" in second.source
    # More warps were no faster: the best stays the first kernel, and the next move is cache hints.
    history = (*history, PastResult(1, second.intent, "correct", 1.49, ()))
    third = OfflineGenerator().propose(context(SOFTMAX, 2, history, first.source, MEMORY_BOUND))
    assert third.intent == (
        "cache hints none -> hints (memory_bound: data read once leaves L2 first, data read again stays) "
        f"[row {ROW_FIRST.replace('evict=none', 'evict=hints')}]"
    )
    assert third.source is not None and 'eviction_policy="evict_first"' in third.source


def test_a_hint_turns_cache_hints_on_and_off() -> None:
    first = OfflineGenerator().propose(context(SOFTMAX))
    history = (PastResult(0, first.intent, "correct", 1.5, ()),)
    on = OfflineGenerator().propose(context(SOFTMAX, 1, history, first.source, hints=("use cache hints",)))
    assert tag(on) == f"row {ROW_FIRST.replace('evict=none', 'evict=hints')}"
    history = (*history, PastResult(1, on.intent, "correct", 1.6, ()))
    off = OfflineGenerator().propose(context(SOFTMAX, 2, history, on.source, hints=("no cache hints, warps 16",)))
    assert off.intent == (
        f"warps 8 -> 16, cache hints hints -> none (user hint) [row {ROW_FIRST.replace('warps=auto', 'warps=16')}]"
    )


def test_compute_bound_matmul_deepens_the_pipeline() -> None:
    first = OfflineGenerator().propose(context(MATMUL))
    history = (PastResult(0, first.intent, "correct", 0.9, ()),)
    second = OfflineGenerator().propose(context(MATMUL, 1, history, first.source, COMPUTE_BOUND))
    assert second.intent == (
        "stages 3 -> 4 (compute_bound: a deeper pipeline hides the loads behind the math) "
        "[matmul BLOCK_M=128 BLOCK_N=256 BLOCK_K=64 warps=8 stages=4 GROUP_M=8]"
    )


def test_a_failed_config_is_not_proposed_again_nor_a_move_further_the_same_way() -> None:
    generator = OfflineGenerator()
    first = generator.propose(context(SOFTMAX))
    history = (PastResult(0, first.intent, "correct", 1.5, ()),)
    second = generator.propose(context(SOFTMAX, 1, history, first.source, MEMORY_BOUND))
    failed = (*history, PastResult(1, second.intent, "compile_error", None, ("out of registers",)))
    third = OfflineGenerator().propose(context(SOFTMAX, 2, failed, first.source, MEMORY_BOUND))
    assert tag(second) == f"row {ROW_FIRST.replace('warps=auto', 'warps=16')}"
    assert tag(third) == f"row {ROW_FIRST.replace('evict=none', 'evict=hints')}"
    seen = {tag(second), tag(third)}
    for i in range(3, 8):
        failed = (*failed, PastResult(i - 1, third.intent, "correct", 1.4, ()))[-5:]
        third = generator.propose(context(SOFTMAX, i, failed, first.source, MEMORY_BOUND))
        assert tag(third) not in seen
        if any(r.status == "compile_error" for r in failed):  # still in the window: no move as far (16 warps)
            assert "warps=16" not in tag(third)
        seen.add(tag(third))


def test_the_same_context_gives_the_same_proposal() -> None:
    first = OfflineGenerator().propose(context(SWISH))
    history = (PastResult(0, first.intent, "correct", 1.1, ()),)
    one = OfflineGenerator().propose(context(SWISH, 1, history, first.source, MEMORY_BOUND))
    two = OfflineGenerator().propose(context(SWISH, 1, history, first.source, MEMORY_BOUND))
    assert one == two
    assert one.intent == (
        "BLOCK 4096 -> 8192 (memory_bound: more bytes in flight per program) [pointwise BLOCK=8192 warps=8 evict=none]"
    )


def test_a_generator_never_repeats_itself_past_the_history_window() -> None:
    generator = OfflineGenerator()
    first = generator.propose(context(SWISH))
    tags = [tag(first)]
    for i in range(1, 12):
        history = (PastResult(0, first.intent, "correct", 1.0, ()),) if i == 1 else ()  # the window forgot
        tags.append(tag(generator.propose(context(SWISH, i, history, first.source))))
    assert len(set(tags)) == len(tags) == 12


def test_when_every_config_was_tried_the_search_space_is_exhausted() -> None:
    plan = recognise_source(SWISH).plan
    assert plan is not None
    everything = space(plan)
    best = OfflineGenerator().propose(context(SWISH)).source
    assert best is not None
    lines = [line for line in best.splitlines() if not line.startswith(TRIED_MARK)]
    lines.append(f"{TRIED_MARK} " + "; ".join(c.tag() for c in everything))
    done = OfflineGenerator().propose(context(SWISH, 40, (), "\n".join(lines)))
    assert (done.source, done.error) == (
        None,
        "offline generator: search space exhausted (68 of 68 pointwise configurations tried around the best, "
        "the rest blocked by failures): use --model with an LLM to go further",
    )


def test_a_hint_names_the_next_config() -> None:
    first = OfflineGenerator().propose(context(SWISH))
    history = (PastResult(0, first.intent, "correct", 1.1, ()),)
    hinted = OfflineGenerator().propose(context(SWISH, 1, history, first.source, hints=("try BLOCK 2048, warps=4",)))
    assert hinted.intent == "BLOCK 4096 -> 2048, warps 8 -> 4 (user hint) [pointwise BLOCK=2048 warps=4 evict=none]"


def test_uncovered_problems_and_other_backends_are_recorded_reasons() -> None:
    conv = OfflineGenerator().propose(context((bundled_dir() / "conv2d_relu_fp32.py").read_text()))
    cuda = OfflineGenerator().propose(context(SOFTMAX, backend="cuda"))
    assert (conv.source, conv.error) == (
        None,
        "no offline template for aten.convolution: use --model with an LLM, or --model human",
    )
    assert (cuda.source, cuda.error) == (
        None,
        "the offline generator writes Triton kernels, not cuda: use --backend triton, or --model with an LLM for CUDA",
    )
