"""FLOP counts with the rule behind each: torch's FlopCounterMode, and stated rules for the rest.

FlopCounterMode knows matmuls, convolutions and attention, and leaves elementwise ops, reductions,
softmax and normalisations at zero. Those get the rules below, each stated in the ``RULE_*`` text
that ``FlopCount.by_rule`` carries, so a user can see which rule counted what and check it by hand.

The rules are deliberately simple (one FLOP per element for every elementwise op, transcendental or
not): for such ops the memory term is 10-100x the compute term on any modern GPU, so the count needs
the right order of magnitude, and a user must be able to predict it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

__all__ = [
    "RULE_ATTENTION",
    "RULE_BIAS",
    "RULE_ELEMENTWISE",
    "RULE_FLOP_COUNTER",
    "RULE_MOVEMENT",
    "RULE_NORM",
    "RULE_REDUCTION",
    "RULE_RMS_NORM",
    "RULE_SOFTMAX",
    "RULE_TRANSCENDENTAL",
    "RULE_UNKNOWN",
    "FlopCount",
    "FlopRule",
    "count_flops",
    "count_flops_and_output",
    "tensors_in",
]

RULE_FLOP_COUNTER = "FlopCounterMode"
RULE_BIAS = "bias add: 1 per output element (FlopCounterMode counts the product only)"
RULE_ELEMENTWISE = "elementwise: 1 per output element"
RULE_TRANSCENDENTAL = "transcendental or activation: 1 per output element"
RULE_REDUCTION = "reduction: 1 per input element"
RULE_SOFTMAX = "softmax and log-softmax: 5 per input element (max, subtract, exp, sum, normalise)"
RULE_NORM = "normalisation: 5 per input element (mean, subtract, square, sum, scale), +1 each for weight and bias"
RULE_RMS_NORM = "rms norm: 3 per input element (square, sum, scale), +1 for weight"
RULE_ATTENTION = "attention: 4*B*H*L*S*E (FlopCounterMode's SDPA formula, for a kernel it has no entry for)"
RULE_MOVEMENT = "data movement, view or allocation: 0"
RULE_UNKNOWN = "no rule: counted as 0"


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


_ELEMENTWISE = _names(
    "add sub rsub mul div neg abs reciprocal sqrt rsqrt square pow relu relu6 clamp clamp_min clamp_max maximum "
    "minimum fmax fmin where threshold hardtanh leaky_relu sign floor ceil round trunc frac remainder fmod lerp "
    "addcmul addcdiv eq ne lt le gt ge logical_and logical_or logical_not logical_xor bitwise_and bitwise_or "
    "bitwise_xor bitwise_not masked_fill hardsigmoid hardswish _prelu_kernel nan_to_num isnan"
)
_TRANSCENDENTAL = _names(
    "exp exp2 expm1 log log2 log10 log1p tanh sigmoid erf erfc erfinv sin cos tan asin acos atan atan2 sinh cosh "
    "gelu silu mish softplus elu selu celu logit"
)
_REDUCTION = _names(
    "sum mean amax amin max min aminmax prod norm linalg_vector_norm var std var_mean std_mean logsumexp argmax "
    "argmin cumsum cumprod any all nansum nanmean count_nonzero"
)
_SOFTMAX = _names("_softmax _log_softmax _safe_softmax softmax log_softmax")
# Normalisations and the positions of their (weight, bias) arguments.
_NORM = {
    "native_layer_norm": (2, 3),
    "native_group_norm": (1, 2),
    "native_batch_norm": (1, 2),
    "_native_batch_norm_legit": (1, 2),
    "_native_batch_norm_legit_no_training": (1, 2),
    "_native_batch_norm_legit_functional": (1, 2),
}
_RMS_NORM = {"_fused_rms_norm": 2, "rms_norm": 2}  # position of the weight
_ATTENTION = frozenset({"_scaled_dot_product_flash_attention_for_cpu"})
# FlopCounterMode ops that take a bias it does not count, and the bias's position.
_BIAS = {"addmm": 0, "baddbmm": 0, "convolution": 2, "_convolution": 2, "convolution_overrideable": 2}
_BIAS |= {"_slow_conv2d_forward": 3}
_MOVEMENT = _names(
    "view _unsafe_view reshape _reshape_alias expand expand_as permute transpose t contiguous clone copy _to_copy "
    "to empty empty_like empty_strided new_empty new_empty_strided new_zeros new_ones zeros zeros_like ones "
    "ones_like full full_like fill zero detach alias lift_fresh lift_fresh_copy slice select squeeze unsqueeze "
    "as_strided cat stack split split_with_sizes chunk unbind narrow index_select gather index repeat flip roll "
    "constant_pad_nd unfold arange _local_scalar_dense"
)


class FlopRule(NamedTuple):
    """FLOPs that one rule counted for one aten op, summed over the op's calls."""

    rule: str
    op: str  # "aten.mm"
    flops: int


@dataclass(frozen=True)
class FlopCount:
    """The FLOPs of one forward, with the rule behind each part (JSON, to cross from the worker)."""

    total_flops: int
    by_rule: tuple[FlopRule, ...]
    dtype: str  # the torch dtype carrying the most FLOPs, "bfloat16"; "float32" when nothing ran

    def to_json(self) -> dict[str, Any]:
        return {
            "total_flops": self.total_flops,
            "by_rule": [r._asdict() for r in self.by_rule],
            "dtype": self.dtype,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FlopCount:
        rules = tuple(FlopRule(str(r["rule"]), str(r["op"]), int(r["flops"])) for r in data["by_rule"])
        return cls(int(data["total_flops"]), rules, str(data["dtype"]))


@dataclass
class _Call:
    op: str  # "aten.addmm"
    dtype: torch.dtype | None
    rules: list[tuple[str, int]]  # what our rules counted
    counted: int = 0  # what FlopCounterMode counted


def tensors_in(value: object) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, list | tuple):
        for item in value:
            yield from tensors_in(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from tensors_in(item)


def _arg_present(args: Sequence[object], index: int) -> bool:
    return index < len(args) and isinstance(args[index], torch.Tensor)


def _rules_for(name: str, args: Sequence[object], out: object) -> list[tuple[str, int]]:
    """Our count for one call of the op ``name`` (without "aten." or an in-place "_")."""
    first_in = next(tensors_in(args), None)
    first_out = next(tensors_in(out), None)
    n_in = 0 if first_in is None else first_in.numel()
    n_out = 0 if first_out is None else first_out.numel()
    if name in _BIAS:
        return [(RULE_BIAS, n_out)] if _arg_present(args, _BIAS[name]) else []
    if name in _ELEMENTWISE:
        return [(RULE_ELEMENTWISE, n_out)]
    if name in _TRANSCENDENTAL:
        return [(RULE_TRANSCENDENTAL, n_out)]
    if name in _REDUCTION:
        return [(RULE_REDUCTION, n_in)]
    if name in _SOFTMAX:
        return [(RULE_SOFTMAX, 5 * n_in)]
    if name in _NORM:
        weight, bias = _NORM[name]
        return [(RULE_NORM, n_in * (5 + _arg_present(args, weight) + _arg_present(args, bias)))]
    if name in _RMS_NORM:
        return [(RULE_RMS_NORM, n_in * (3 + _arg_present(args, _RMS_NORM[name])))]
    if name in _ATTENTION:
        q, k, v = (a for a in args[:3] if isinstance(a, torch.Tensor))
        bh = math.prod(int(n) for n in q.shape[:-2])
        return [(RULE_ATTENTION, 2 * bh * q.shape[-2] * k.shape[-2] * (q.shape[-1] + v.shape[-1]))]
    if name in _MOVEMENT:
        return [(RULE_MOVEMENT, 0)]
    return [(RULE_UNKNOWN, 0)]


class _Recorder(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Every aten op that really ran, with what FlopCounterMode counted for it.

    Entered *below* FlopCounterMode, so it sees the ops FlopCounterMode executes after any
    decomposition. FlopCounterMode adds a call's FLOPs right after the call returns, so the growth
    of its total by the next op (or the end) belongs to the previous call.
    """

    def __init__(self, counter: FlopCounterMode) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self._counter = counter
        self._seen = 0
        self.calls: list[_Call] = []

    def settle(self) -> None:
        total = self._counter.get_total_flops()
        if self.calls:
            self.calls[-1].counted += total - self._seen
        self._seen = total

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        self.settle()
        out = func(*args, **(kwargs or {}))
        op = str(func.overloadpacket)
        name = op.removeprefix("aten.")
        if name.endswith("_") and not name.endswith("__"):
            name = name[:-1]
        floats = [t for t in tensors_in(args) if t.is_floating_point()] or list(tensors_in(out))
        self.calls.append(_Call(op, floats[0].dtype if floats else None, _rules_for(name, args, out)))
        return out


def count_flops_and_output(model: torch.nn.Module, inputs: Sequence[object]) -> tuple[FlopCount, object]:
    counter = FlopCounterMode(display=False)
    recorder = _Recorder(counter)
    registry = {str(packet) for packet in counter.flop_registry}
    with torch.no_grad(), recorder, counter:
        out = model(*inputs)
        recorder.settle()
    totals: dict[tuple[str, str], int] = {}
    by_dtype: dict[torch.dtype, int] = {}
    for call in recorder.calls:
        in_registry = call.op in registry
        entries = [(RULE_FLOP_COUNTER, call.counted)] if in_registry else []
        entries += [e for e in call.rules if in_registry == (e[0] == RULE_BIAS)]
        for rule, flops in entries:
            totals[(rule, call.op)] = totals.get((rule, call.op), 0) + flops
            if call.dtype is not None:
                by_dtype[call.dtype] = by_dtype.get(call.dtype, 0) + flops
    rules = tuple(FlopRule(rule, op, flops) for (rule, op), flops in totals.items())
    first = next((c.dtype for c in recorder.calls if c.dtype is not None), torch.float32)
    dtype = max(by_dtype, key=lambda d: by_dtype[d]) if any(by_dtype.values()) else first
    return FlopCount(sum(r.flops for r in rules), rules, str(dtype).removeprefix("torch.")), out


def count_flops(model: torch.nn.Module, inputs: Sequence[object]) -> FlopCount:
    """FLOPs of one forward of ``model`` on ``inputs`` (run here, under ``torch.no_grad``)."""
    return count_flops_and_output(model, inputs)[0]
