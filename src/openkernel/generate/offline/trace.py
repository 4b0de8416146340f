"""Trace a reference's forward into ATen ops, on the meta device, with shapes, dtypes and data flow.

The reference file is the user's own (trusted) code: it is executed in a fresh module namespace,
``Model`` is built from ``get_init_inputs()`` and the inputs from ``get_inputs()`` under
``torch.device("meta")`` (full sizes, no memory, milliseconds), and one forward is recorded with
``make_fx`` over ``torch.func.functional_call``, so that parameters and buffers arrive as graph
inputs beside the forward's own tensors. The result is a small, frozen IR (``Trace``) that the
pattern matcher reads; anything that stops the trace becomes :class:`Uncovered` with a reason.
"""

from __future__ import annotations

import inspect
import operator
import threading
import types
from dataclasses import dataclass
from typing import Any, TypeAlias

import torch
from torch.func import functional_call
from torch.fx.experimental.proxy_tensor import make_fx

__all__ = ["Arg", "OpCall", "Ref", "Source", "TensorMeta", "Trace", "Uncovered", "trace_reference"]

REFERENCE_MODULE = "openkernel_offline_reference"  # the fresh namespace's __name__
ADVICE = "use --model with an LLM, or --model human"  # what the user can do about an uncovered problem


class Uncovered(Exception):
    """The offline generator cannot write a kernel for this problem; ``reason`` says why, in one line."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class TensorMeta:
    shape: tuple[int, ...]
    dtype: torch.dtype


@dataclass(frozen=True)
class Ref:
    """A value of the trace: source ``index`` when below ``len(sources)``, else an op's result."""

    index: int


# An op argument: a Ref, a Python number, bool, str or None, a torch.dtype / device / layout, or a tuple of them.
Arg: TypeAlias = Any


@dataclass(frozen=True)
class Source:
    """A tensor the forward reads: one of its inputs, or a parameter or buffer of the model."""

    name: str  # how ModelNew.forward reaches it: "x", "self.norm.weight"
    role: str  # "input", "parameter" or "buffer"
    meta: TensorMeta


@dataclass(frozen=True)
class OpCall:
    op: str  # the overload, as torch prints it: "aten.mul.Tensor"; "getitem" for a tuple element
    packet: str  # without the overload: "aten.mul"
    args: tuple[tuple[str, Arg], ...]  # every argument of the op's schema, by name, defaults filled in
    meta: TensorMeta | None  # None when the op returns several tensors

    def get(self, name: str) -> Arg:
        for key, value in self.args:
            if key == name:
                return value
        return None

    def at(self, position: int) -> Arg:
        return self.args[position][1] if position < len(self.args) else None


@dataclass(frozen=True)
class Trace:
    sources: tuple[Source, ...]
    calls: tuple[OpCall, ...]  # value len(sources) + i is calls[i]'s result
    output: Ref
    forward_params: tuple[str, ...]  # the reference forward's parameter names, in order

    def meta(self, ref: Ref) -> TensorMeta | None:
        n = len(self.sources)
        return self.sources[ref.index].meta if ref.index < n else self.calls[ref.index - n].meta

    def call(self, ref: Ref) -> OpCall | None:
        n = len(self.sources)
        return None if ref.index < n else self.calls[ref.index - n]

    def users(self) -> dict[int, list[int]]:
        """Value index -> the values whose op reads it."""
        out: dict[int, list[int]] = {}
        n = len(self.sources)
        for i, call in enumerate(self.calls):
            for ref in _refs(tuple(v for _, v in call.args)):
                out.setdefault(ref.index, []).append(n + i)
        return out


def _refs(args: tuple[Any, ...]) -> list[Ref]:
    found: list[Ref] = []
    for a in args:
        if isinstance(a, Ref):
            found.append(a)
        elif isinstance(a, tuple):
            found.extend(_refs(a))
    return found


def _attribute_path(name: str) -> str:
    """``norm.weight`` -> ``self.norm.weight``; ``layers.0.weight`` -> ``self.get_parameter(...)`` style."""
    if all(part.isidentifier() for part in name.split(".")):
        return f"self.{name}"
    return f"self.get_submodule({'.'.join(name.split('.')[:-1])!r}).{name.rsplit('.', maxsplit=1)[-1]}"


# make_fx keeps global state (its patchers, a lazily imported torch._dynamo): sessions tracing in threads
# at once (a benchmark runs several) failed with "CURRENT_PATCHER is None" or a half-imported module.
# A trace takes milliseconds, so one at a time costs nothing.
_TRACING = threading.Lock()


def trace_reference(problem_source: str) -> Trace:
    """Execute the reference, build Model and inputs on the meta device, record one forward."""
    with _TRACING:
        return _trace(problem_source)


def _trace(problem_source: str) -> Trace:
    module = types.ModuleType(REFERENCE_MODULE)
    with torch.random.fork_rng(devices=[]):
        try:
            exec(compile(problem_source, "<reference>", "exec"), module.__dict__)
        except Exception as err:
            raise Uncovered(f"cannot trace the reference: executing it failed ({type(err).__name__}: {err})") from err
        model_cls = module.__dict__.get("Model")
        if not isinstance(model_cls, type) or not issubclass(model_cls, torch.nn.Module):
            raise Uncovered("cannot trace the reference: it defines no Model class (an nn.Module)")
        for name in ("get_inputs", "get_init_inputs"):
            if not callable(module.__dict__.get(name)):
                raise Uncovered(f"cannot trace the reference: it defines no {name}()")
        try:
            with torch.device("meta"), torch.no_grad():
                model = model_cls(*module.get_init_inputs())
                inputs = list(module.get_inputs())
                graph = _record(model, inputs)
        except Uncovered:
            raise
        except Exception as err:
            first = str(err).strip().splitlines()[0] if str(err).strip() else ""
            raise Uncovered(
                f"cannot trace the reference on the meta device ({type(err).__name__}: {first[:200]})"
            ) from err
    return _to_trace(graph, model, inputs)


def _record(model: torch.nn.Module, inputs: list[Any]) -> torch.fx.GraphModule:
    state = {**dict(model.named_parameters()), **dict(model.named_buffers())}
    names = list(state)
    tensor_at = [i for i, v in enumerate(inputs) if isinstance(v, torch.Tensor)]

    def forward(*flat: torch.Tensor) -> Any:
        args = list(inputs)
        for slot, value in zip(tensor_at, flat[len(names) :], strict=True):
            args[slot] = value
        return functional_call(model, dict(zip(names, flat[: len(names)], strict=True)), tuple(args))

    return make_fx(forward)(*state.values(), *(inputs[i] for i in tensor_at))


def _to_trace(graph: torch.fx.GraphModule, model: torch.nn.Module, inputs: list[Any]) -> Trace:
    params = {name for name, _ in model.named_parameters()}
    state_names = [*dict(model.named_parameters()), *dict(model.named_buffers())]
    try:
        signature = inspect.signature(model.forward)
        positional = [p.name for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
        if any(p.kind is p.VAR_POSITIONAL for p in signature.parameters.values()):
            positional = [f"arg{i}" for i in range(len(inputs))]
    except (TypeError, ValueError):
        positional = [f"arg{i}" for i in range(len(inputs))]
    positional = (positional + [f"arg{i}" for i in range(len(positional), len(inputs))])[: len(inputs)]
    input_names = [positional[i] for i, v in enumerate(inputs) if isinstance(v, torch.Tensor)]
    index: dict[torch.fx.Node, int] = {}
    sources: list[Source] = []
    calls: list[OpCall] = []
    output: Ref | None = None
    for node in graph.graph.nodes:
        if node.op == "placeholder":
            k, meta = len(sources), _meta(node)
            if meta is None:
                raise Uncovered("cannot trace the reference: an input is not a tensor")
            if k < len(state_names):
                name, role = state_names[k], "parameter" if state_names[k] in params else "buffer"
                sources.append(Source(_attribute_path(name), role, meta))
            else:
                sources.append(Source(input_names[k - len(state_names)], "input", meta))
            index[node] = k
        elif node.op == "call_function":
            if node.target is operator.getitem:
                op, packet = "getitem", "getitem"
                named: list[tuple[str, Any]] = [("self", node.args[0]), ("index", node.args[1])]
            else:
                op, packet = str(node.target), str(getattr(node.target, "overloadpacket", node.target))
                named = _named_args(node)
            args = tuple((k, _arg(v, index)) for k, v in named)
            index[node] = len(sources) + len(calls)
            calls.append(OpCall(op, packet, args, _meta(node)))
        elif node.op == "output":
            result = node.args[0]
            if isinstance(result, (tuple, list)):
                if len(result) != 1:
                    raise Uncovered(
                        f"no offline template for a forward that returns {len(result)} values: "
                        "the templates write one tensor"
                    )
                result = result[0]
            if not isinstance(result, torch.fx.Node):
                raise Uncovered("no offline template for a forward that returns no tensor computed from its inputs")
            output = Ref(index[result])
        else:
            raise Uncovered(f"cannot trace the reference: unexpected graph node {node.op}")
    if output is None:
        raise Uncovered("cannot trace the reference: the forward returned nothing")
    return Trace(tuple(sources), tuple(calls), output, tuple(positional))


def _meta(node: torch.fx.Node) -> TensorMeta | None:
    value = node.meta.get("val")
    if isinstance(value, torch.Tensor):
        return TensorMeta(tuple(int(s) for s in value.shape), value.dtype)
    return None


def _named_args(node: torch.fx.Node) -> list[tuple[str, Any]]:
    """The node's arguments by the op's schema names, with the schema's defaults for those left out."""
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return [(f"arg{i}", a) for i, a in enumerate(node.args)] + list(node.kwargs.items())
    named: list[tuple[str, Any]] = []
    for i, argument in enumerate(schema.arguments):
        if i < len(node.args):
            named.append((argument.name, node.args[i]))
        elif argument.name in node.kwargs:
            named.append((argument.name, node.kwargs[argument.name]))
        else:
            named.append((argument.name, argument.default_value if argument.has_default_value() else None))
    return named


def _arg(value: Any, index: dict[torch.fx.Node, int]) -> Any:
    if isinstance(value, torch.fx.Node):
        return Ref(index[value])
    if isinstance(value, (list, tuple)):
        return tuple(_arg(v, index) for v in value)
    return value
