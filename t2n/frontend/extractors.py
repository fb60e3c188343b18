"""Module extractors: every instance of a given ``nn.Module`` class exported as one unit.

``compile(model, args, extractors=[ModuleExtractor(MyBlock, lower=lower_block)])``: while
the model is traced, each call of a ``MyBlock`` instance runs its real ``forward`` with
the tracer paused (its ops are not recorded; its outputs give the shapes) and is
recorded as one ``prim::PythonOp`` node of an ``autograd.Function`` class made for this
compile call only. Lowering gives that node to ``lower_block(ctx, module, *args,
**kwargs)``: ``ctx`` is an :class:`ExtractorContext` (a Builder in ``ctx.b``, the
module's parameters as IR variables through ``ctx.parameter``), ``module`` the instance
and the arguments are those of the call, tensors replaced by IR values. It returns IR
values in the structure ``forward`` returned.

Nothing global is changed: the extractors are a list passed to one call, and the only
objects touched are the model's own module instances, for the duration of the trace.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import torch

from t2n.errors import ExtractorError, InvalidArgumentError
from t2n.frontend import torch_private
from t2n.frontend.context import LoweringContext, ScriptLowering, UnsupportedHere
from t2n.frontend.io import Spec, flatten
from t2n.frontend.trace_watch import unwatched
from t2n.ir import Value

ExtractorRule = Callable[..., Any]
"""``lower(ctx, module, *args, **kwargs)`` → IR value(s) shaped like ``forward``'s output."""


@attrs.frozen
class ModuleExtractor:
    """Export every instance of ``module_type`` (subclasses included) with ``lower``
    instead of tracing its ``forward``."""

    module_type: type[torch.nn.Module]
    lower: ExtractorRule

    def __attrs_post_init__(self) -> None:
        if not (isinstance(self.module_type, type) and issubclass(self.module_type, torch.nn.Module)):
            raise InvalidArgumentError(
                f"ModuleExtractor: module_type must be an nn.Module class, got {self.module_type!r}; "
                "pass the class itself (ModuleExtractor(MyBlock, lower=...))"
            )
        if not callable(self.lower):
            raise InvalidArgumentError(
                f"ModuleExtractor({self.module_type.__name__}): lower must be a function "
                f"lower(ctx, module, *args, **kwargs), got {type(self.lower).__name__}"
            )


def check_extractors(extractors: Any) -> list[ModuleExtractor]:
    """The ``extractors`` argument of ``compile`` as a list, each a :class:`ModuleExtractor`
    and no class claimed twice."""
    if extractors is None:
        return []
    if isinstance(extractors, ModuleExtractor) or not isinstance(extractors, (list, tuple)):
        raise InvalidArgumentError(
            f"extractors must be a list of t2n.ModuleExtractor, got {type(extractors).__name__}"
        )
    seen: set[type[torch.nn.Module]] = set()
    for i, e in enumerate(extractors):
        if not isinstance(e, ModuleExtractor):
            raise InvalidArgumentError(f"extractors[{i}] must be a t2n.ModuleExtractor, got {type(e).__name__}")
        if e.module_type in seen:
            raise InvalidArgumentError(
                f"extractors: {e.module_type.__name__} has two extractors; keep one"
            )
        seen.add(e.module_type)
    return list(extractors)


@attrs.define(eq=False)
class ExtractedCall:
    """One call of an extracted module, as the trace saw it."""

    extractor: ModuleExtractor
    module: torch.nn.Module
    path: str
    forward: Callable[..., Any]
    inputs: Spec
    """``(args, kwargs)`` of the call with tensors as leaves (the node's inputs, in order)."""
    outputs: Spec | None = None
    output_types: list[tuple[torch.dtype, tuple[int, ...]]] = attrs.field(factory=list)


class ExtractedCalls:
    """The extractors of one compile call, and the calls they claimed during its trace."""

    def __init__(self, extractors: Sequence[ModuleExtractor]) -> None:
        self.extractors = list(extractors)
        self.calls: dict[int, ExtractedCall] = {}
        self._ids = itertools.count()
        self.function = _function_class(self)

    def claims(self, module: torch.nn.Module) -> ModuleExtractor | None:
        for e in self.extractors:
            if isinstance(module, e.module_type):
                return e
        return None

    def wrap(self, module: torch.nn.Module, path: str, extractor: ModuleExtractor,
             original: Callable[..., Any]) -> Callable[..., Any]:
        """The forward that records each call of ``module`` (whose own forward is
        ``original``) as one node."""

        def forward(*args: Any, **kwargs: Any) -> Any:
            tensors, _, spec = flatten((args, kwargs))
            key = next(self._ids)
            self.calls[key] = ExtractedCall(extractor, module, path, original, spec)
            flat = self.function.apply(key, *tensors)
            call = self.calls[key]
            assert call.outputs is not None
            return call.outputs.unflatten(list(flat) if isinstance(flat, tuple) else [flat])

        return forward

    def run(self, key: int, tensors: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        """The real forward of call ``key``, not recorded and not watched."""
        call = self.calls[key]
        args, kwargs = call.inputs.unflatten(list(tensors))
        state = torch_private.tracing_state()
        torch_private.set_tracing_state(None)
        try:
            with unwatched():
                out = call.forward(*args, **kwargs)
        finally:
            torch_private.set_tracing_state(state)
        flat, _, spec = flatten(out)
        if not flat:
            raise ExtractorError(
                f"{type(call.module).__name__} at {call.path or 'the model root'}: its forward returned "
                "no tensor, so it cannot be extracted; drop its extractor"
            )
        call.outputs = spec
        call.output_types = [(t.dtype, tuple(t.shape)) for t in flat]
        return tuple(t.detach() for t in flat)

    def call_of(self, node: torch._C.Node) -> ExtractedCall | None:
        """The extracted call a ``prim::PythonOp`` node records, if it is one of ours."""
        if getattr(torch_private.python_op_function(node), "__self__", None) is not self.function:
            return None
        key = torch_private.python_op_constants(node)[0]
        return self.calls.get(key) if isinstance(key, int) else None


def _function_class(calls: ExtractedCalls) -> type[torch.autograd.Function]:
    """An ``autograd.Function`` class of this compile call only: the tracer records each
    ``apply`` as one node that holds the class, so the lowering can find the call."""

    class ExtractedModule(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, key: int, *tensors: torch.Tensor) -> Any:
            out = calls.run(key, tensors)
            return out[0] if len(out) == 1 else out

        @staticmethod
        def backward(ctx: Any, *grads: Any) -> Any:
            raise ExtractorError("an extracted module is for export only; it has no backward")

    return ExtractedModule


class ExtractorContext(LoweringContext):
    """What an extractor's ``lower`` function gets: a Builder at the call's source
    location in ``self.b`` and the module's parameters as IR variables."""

    def __init__(self, lowering: ScriptLowering, node: torch._C.Node, call: ExtractedCall) -> None:
        super().__init__(lowering, node)
        self.call = call
        self.module = call.module

    def parameter(self, name: str) -> Value:
        """The module's parameter or buffer ``name`` (``"weight"``, ``"proj.bias"``) as an IR
        variable, exported under its state-dict name (``blocks.0.weight``)."""
        tensors = dict(self.module.named_parameters()) | dict(self.module.named_buffers())
        t = tensors.get(name)
        if t is None:
            raise ExtractorError(
                f"{type(self.module).__name__} at {self.call.path or 'the model root'} has no parameter or "
                f"buffer {name!r} (it has: {', '.join(sorted(tensors)) or 'none'})"
            )
        prefix = f"{self.call.path}." if self.call.path else ""
        return self.lowering.parameter(t, self.lowering.scope_prefix + prefix + name)


def lower_extracted(lowering: ScriptLowering, node: torch._C.Node, call: ExtractedCall) -> Any:
    """Run the user's rule on one extracted call: the IR values it returns, checked
    against the outputs of the real forward (count, dtype, static sizes)."""
    ctx = ExtractorContext(lowering, node, call)
    values = [lowering.env[v.unique()] for v in node.inputs()]
    args, kwargs = call.inputs.unflatten(values)
    where = f"{type(call.module).__name__} at {call.path or 'the model root'}"
    try:
        result = call.extractor.lower(ctx, call.module, *args, **kwargs)
    except (ExtractorError, UnsupportedHere):
        raise
    except Exception as exc:
        raise ExtractorError(
            f"the extractor of {where} failed ({ctx.loc.source}): {type(exc).__name__}: {exc}"
        ) from exc
    flat = _values_in(result)
    if len(flat) != len(call.output_types) or not all(isinstance(v, Value) for v in flat):
        raise ExtractorError(
            f"the extractor of {where} returned {_describe(result)}; its forward returned "
            f"{len(call.output_types)} tensor(s): return one IR value per tensor, in the same structure"
        )
    from t2n.frontend.dtypes import to_ir

    for i, (v, (dtype, shape)) in enumerate(zip(flat, call.output_types)):
        dims = list(v.type.shape)
        static = [d for d in dims if isinstance(d, int)]
        if v.type.dtype is not to_ir(dtype) or len(dims) != len(shape) or (
                len(static) == len(dims) and tuple(static) != shape):
            raise ExtractorError(
                f"the extractor of {where}: output {i} is {v.type} but the module's forward gave "
                f"{to_ir(dtype)}{list(shape)}; make the rule compute what forward computes"
            )
    return flat[0] if len(flat) == 1 else tuple(flat)


def _values_in(x: Any) -> list[Any]:
    if isinstance(x, (tuple, list)):
        return [v for item in x for v in _values_in(item)]
    if isinstance(x, dict):
        return [v for item in x.values() for v in _values_in(item)]
    return [x]


def _describe(x: Any) -> str:
    flat = _values_in(x)
    kinds = ", ".join(type(v).__name__ for v in flat[:4])
    return f"{len(flat)} item(s) ({kinds})"


__all__ = ["ExtractedCalls", "ExtractorContext", "ModuleExtractor", "check_extractors", "lower_extracted"]
