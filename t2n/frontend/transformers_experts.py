"""Mixture-of-experts blocks of ``transformers`` models: their routed experts exported as
one IR op (``moe_experts``, :mod:`t2n.ir.ops.moe`) by a module extractor, whatever the
family.

``transformers`` gives every sparse MoE family one experts interface
(``use_experts_implementation``): a module holding ``gate_up_proj`` (``[E, 2I, D]``, or
``[E, D, 2I]`` when ``is_transposed``) and ``down_proj``, optional biases, and a
``_apply_gate`` that turns the fused gate/up projection into the hidden units. Its
forward (grouped matrix products over the tokens each expert was given) cannot be
traced; :func:`moe_extractors` gives, for each such class in a model, a
:class:`t2n.ModuleExtractor` that writes the call as ``moe_experts``.

What ``_apply_gate`` computes is found by running it on a probe and comparing with the
forms tract's operator knows (``act(gate) * up`` with ``gate``/``up`` the two halves or
the even/odd columns, ``act`` one of SiLU, GELU, tanh-GELU and ReLU; gpt-oss's clamped
SwiGLU from its ``alpha`` and ``limit``): nothing is keyed on a family name. An experts
class whose gate is none of those is not extracted; its forward is then traced with
``transformers``' own batched implementation (gathered expert weights, standard
operations).

The gate and up halves become two weights of their own, sliced from the fused one as
the artifact is written (never copied whole, one expert at a time): ``experts.gate_proj``
and ``experts.up_proj`` beside ``experts.down_proj``, each expert's matrix stored
``[in, out]`` (the ``canonical`` layout, which tract's operator runs about 20 % faster
than ``nn.Linear``'s ``[out, in]``), except Q4_0 experts, whose blocks run along each
row's inputs and so keep ``[out, in]`` (``linear``).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import attrs
import numpy as np
import torch

from t2n.errors import ExtractorError
from t2n.frontend.extractors import ModuleExtractor
from t2n.ir import TensorData, Value

EXPERTS_ATTRIBUTES = ("gate_up_proj", "down_proj", "is_transposed", "has_gate")
"""What marks a module of transformers' experts interface."""

FALLBACK_IMPLEMENTATION = "batched_mm"
"""transformers' experts implementation traced for experts that are not extracted."""

_ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "silu": torch.nn.functional.silu,
    "gelu": torch.nn.functional.gelu,
    "gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
    "relu": torch.relu,
}


@attrs.frozen
class ExpertsForm:
    """How one experts class computes, as ``moe_experts`` says it."""

    activation: str
    interleaved: bool
    """gate and up are the even and odd columns of the fused projection (else its halves)."""
    transposed: bool
    """weights stored ``[E, in, out]`` (``canonical`` layout) rather than ``[E, out, in]``."""
    has_bias: bool
    act_alpha: float | None = None
    act_limit: float | None = None


def is_experts_module(module: torch.nn.Module) -> bool:
    return all(hasattr(module, a) for a in EXPERTS_ATTRIBUTES)


def _probe(width: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.randn(7, width, generator=g, dtype=torch.float64) * 6


def _candidates(module: torch.nn.Module, half: int) -> Iterator[tuple[ExpertsForm, Callable[[torch.Tensor], torch.Tensor]]]:
    transposed, has_bias = bool(module.is_transposed), bool(getattr(module, "has_bias", False))
    splits = {False: lambda z: (z[:, :half], z[:, half:]), True: lambda z: (z[:, 0::2], z[:, 1::2])}
    act_fn = getattr(module, "act_fn", None)
    for interleaved, split in splits.items():
        if act_fn is not None:
            for name, fn in _ACTIVATIONS.items():
                def gated(z: torch.Tensor, fn: Callable[[torch.Tensor], torch.Tensor] = fn,
                          split: Any = split) -> torch.Tensor:
                    gate, up = split(z)
                    out: torch.Tensor = fn(gate) * up
                    return out

                yield ExpertsForm(name, interleaved, transposed, has_bias), gated
        alpha, limit = getattr(module, "alpha", None), getattr(module, "limit", None)
        if isinstance(alpha, (int, float)) and isinstance(limit, (int, float)):
            def clamped(z: torch.Tensor, split: Any = split, a: float = float(alpha), m: float = float(limit)
                        ) -> torch.Tensor:
                gate, up = split(z)
                gate, up = gate.clamp(max=m), up.clamp(-m, m)
                out: torch.Tensor = (up + 1) * gate * torch.sigmoid(gate * a)
                return out

            yield ExpertsForm("silu", interleaved, transposed, has_bias, float(alpha), float(limit)), clamped


def experts_form(module: torch.nn.Module) -> ExpertsForm | None:
    """What ``module`` (of transformers' experts interface) computes, or None when it is
    not a form ``moe_experts`` holds."""
    if not is_experts_module(module) or not module.has_gate or getattr(module, "has_post_expert_norm", False):
        return None
    gate_up, down = module.gate_up_proj, module.down_proj
    if not isinstance(gate_up, torch.Tensor) or not isinstance(down, torch.Tensor) or gate_up.dim() != 3 \
            or down.dim() != 3:
        return None
    experts, d_in, fused = (gate_up.shape[0], gate_up.shape[1], gate_up.shape[2]) if module.is_transposed \
        else (gate_up.shape[0], gate_up.shape[2], gate_up.shape[1])
    expected_down = (experts, fused // 2, d_in) if module.is_transposed else (experts, d_in, fused // 2)
    if fused % 2 or tuple(down.shape) != expected_down:
        return None
    z = _probe(int(fused))
    apply_gate = getattr(module, "_apply_gate", None)
    if not callable(apply_gate):
        return None
    with torch.no_grad():
        try:
            expected = apply_gate(z)
        except Exception:  # a gate that cannot run on a probe is not one of ours
            return None
        for form, fn in _candidates(module, int(fused) // 2):
            got = fn(z)
            if got.shape == expected.shape and torch.allclose(got, expected, rtol=1e-9, atol=1e-9):
                return form
    return None


def moe_extractors(model: torch.nn.Module) -> list[ModuleExtractor]:
    """A :class:`t2n.ModuleExtractor` for each experts class of ``model`` whose form
    :func:`experts_form` recognizes (the forms of one class's instances must agree)."""
    forms: dict[type[torch.nn.Module], ExpertsForm | None] = {}
    for module in model.modules():
        if not is_experts_module(module):
            continue
        form = experts_form(module)
        cls = type(module)
        if cls in forms and forms[cls] != form:
            forms[cls] = None
        else:
            forms.setdefault(cls, form)
    return [ModuleExtractor(cls, lower=_lowering(cls)) for cls, form in forms.items() if form is not None]


def library_extractors(model: torch.nn.Module, given: Sequence[ModuleExtractor]) -> list[ModuleExtractor]:
    """The extractors ``t2n.compile`` adds by itself (jit frontend): one per experts class
    of ``model`` that ``given`` (the user's) does not claim. transformers' own forward of
    these modules (grouped products over the tokens sorted by expert) traces into a sort
    along the token axis, which tract cannot run on a dynamic axis, and into every expert
    run on every token; ``moe_experts`` is tract's fused operator."""
    claimed = tuple(e.module_type for e in given)
    if not any(is_experts_module(m) and not isinstance(m, claimed) for m in model.modules()):
        return []
    return [e for e in moe_extractors(model) if not issubclass(e.module_type, claimed)]


@contextlib.contextmanager
def traceable_experts(model: torch.nn.Module) -> Iterator[None]:
    """While tracing: experts run transformers' batched implementation (standard
    operations) instead of its grouped one, which cannot be traced nor run on the meta
    device. (An extracted module's forward still runs, untraced, for its output's shape.)"""
    configs = []
    seen: set[int] = set()
    for module in model.modules():
        config = getattr(module, "config", None)
        if is_experts_module(module) and config is not None and hasattr(config, "_experts_implementation") \
                and id(config) not in seen:
            seen.add(id(config))
            configs.append((config, config._experts_implementation))
    try:
        for config, _ in configs:
            config._experts_implementation = FALLBACK_IMPLEMENTATION
        yield
    finally:
        for config, before in reversed(configs):
            config._experts_implementation = before


def _bind(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any, Any]:
    """(hidden states, expert indices, expert weights) of one call of an experts module."""
    forward = inspect.unwrap(type(module).forward)
    try:
        bound = inspect.signature(forward).bind(module, *args, **kwargs)
    except TypeError as exc:
        raise ExtractorError(f"{type(module).__name__}: cannot read the call's arguments ({exc})") from exc
    values = list(bound.arguments.values())[1:]
    if len(values) < 3:
        raise ExtractorError(f"{type(module).__name__}: expected (hidden_states, indices, weights), got "
                             f"{len(values)} arguments")
    return values[0], values[1], values[2]


def _variable_data(v: Value) -> tuple[TensorData, str]:
    p = v.producer
    if p is None or p.kind != "variable":
        raise ExtractorError(f"expected a weight (a variable), got a value made by {p.kind if p else 'nothing'}")
    return p.attrs["data"], str(p.attrs["label"])


def sliced_weight(data: TensorData, axis: int, start: int, stop: int | None, step: int, name: str) -> TensorData:
    """``data`` sliced on ``axis`` (as the artifact is written); a Q4_0 weight sliced
    along whole rows stays Q4_0 (its blocks and scales are those rows')."""
    from t2n.ir.tensor_views import AxisSliceData
    from t2n.quant.q4_0 import BLOCK, Q40Data
    from t2n.quant.q4_0_stream import QuantizedOnRead

    end = data.shape[axis] if stop is None else stop
    if not isinstance(data, Q40Data):
        return _slice(data, axis, start, end, step)
    source = data.source
    if axis == len(data.shape) - 1:  # across the blocks: the values, in float
        return AxisSliceData(source, axis, start, end, step)
    if isinstance(source, QuantizedOnRead) and np.shares_memory(source.scales, data.scales):
        fresh = QuantizedOnRead(AxisSliceData(source.source, axis, start, end, step), source.percentile, name)
        return Q40Data(fresh, fresh.scales, name)
    scales = data.scales.reshape(*data.shape[:-1], data.shape[-1] // BLOCK)
    index = [slice(None)] * scales.ndim
    index[axis] = slice(start, end, step)
    return Q40Data(AxisSliceData(source, axis, start, end, step), np.ascontiguousarray(scales[tuple(index)]), name)


def _is_q4_0(data: TensorData) -> bool:
    from t2n.ir.tensor_data import ConvertedData
    from t2n.quant.q4_0 import is_q4_0

    return is_q4_0(data) or (isinstance(data, ConvertedData) and is_q4_0(data.source))


def _swapped(data: TensorData) -> TensorData:
    from t2n.ir.tensor_views import SwappedLastAxesData

    return SwappedLastAxesData(data)


def _slice(data: TensorData, axis: int, start: int, stop: int, step: int) -> TensorData:
    """``data`` sliced on ``axis``; the slice that is exactly one of the parts a
    checkpoint's conversion joined (gate or up of ``cat([gate, up])``) is that part
    itself, read once (also under a dtype conversion)."""
    from t2n.ir.tensor_data import ConvertedData
    from t2n.ir.tensor_views import AxisSliceData, JoinedData
    from t2n.quant.parallel import ConvertedOnWorkers

    if isinstance(data, (ConvertedData, ConvertedOnWorkers)):
        inner = _slice(data.source, axis, start, stop, step)
        if not isinstance(inner, AxisSliceData):
            return type(data)(inner, data.dtype)
    if isinstance(data, JoinedData) and not data.stack and data.axis == axis and step == 1:
        at = 0
        for part in data.sources:
            if (at, at + part.shape[axis]) == (start, stop):
                return part
            at += part.shape[axis]
    return AxisSliceData(data, axis, start, stop, step)


def _halves(ctx: Any, fused: Value, form: ExpertsForm, axis: int, suffix: str, swap: bool = False
            ) -> tuple[Value, Value]:
    """The gate and up parts of a fused weight (or bias), as variables of their own
    (each expert's matrix transposed when ``swap``)."""
    data, label = _variable_data(fused)
    size = data.shape[axis]
    parts = [(0, size // 2, 1), (size // 2, None, 1)] if not form.interleaved else [(0, None, 2), (1, None, 2)]
    out = []
    for kind, (start, stop, step) in zip(("gate_proj", "up_proj"), parts):
        name = label.removesuffix(f"gate_up_proj{suffix}") + kind + suffix
        part = sliced_weight(data, axis, start, stop, step, name)
        out.append(ctx.b.variable(_swapped(part) if swap else part, name))
    return out[0], out[1]


def _lowering(cls: type[torch.nn.Module]) -> Callable[..., Any]:
    def lower(ctx: Any, module: torch.nn.Module, *args: Any, **kwargs: Any) -> Value:
        form = experts_form(module)
        if form is None:
            raise ExtractorError(f"{cls.__name__}: this instance computes another gate than the class's first")
        x, index, weights = _bind(module, args, kwargs)
        b = ctx.b
        lead = None
        if x.rank != 2:
            lead = x
            x = b.op("reshape", x, b.const(np.array([-1, int(x.type.shape[-1])], np.int64)))
        gate_up, down = ctx.parameter("gate_up_proj"), ctx.parameter("down_proj")
        # tract's operator runs experts stored [in, out] fastest (canonical); Q4_0 blocks
        # run along each row's inputs, so quantized experts keep nn.Linear's [out, in]
        swap = not form.transposed and not _is_q4_0(_variable_data(gate_up)[0])
        w_gate, w_up = _halves(ctx, gate_up, form, 2 if form.transposed else 1, "", swap)
        if swap:
            data, label = _variable_data(down)
            down = b.variable(_swapped(data), label)
        inputs = [x, index, weights, w_gate, down, w_up]
        if form.has_bias:
            b_gate, b_up = _halves(ctx, ctx.parameter("gate_up_proj_bias"), form, 1, "_bias")
            inputs += [b_gate, b_up, ctx.parameter("down_proj_bias")]
        flags = {"has_up": True, "has_gate_bias": form.has_bias, "has_up_bias": form.has_bias,
                 "has_down_bias": form.has_bias}
        layout = "canonical" if form.transposed or swap else "linear"
        y = b.op("moe_experts", *inputs, layout=layout, activation=form.activation,
                 act_alpha=form.act_alpha, act_limit=form.act_limit, **flags)
        if lead is not None:
            y = b.op("reshape", y, b.const(np.array([int(d) if isinstance(d, int) else -1 for d in lead.type.shape],
                                                    np.int64)))
        out: Value = y
        return out

    return lower


__all__ = ["ExpertsForm", "experts_form", "is_experts_module", "library_extractors", "moe_extractors",
           "sliced_weight", "traceable_experts"]
