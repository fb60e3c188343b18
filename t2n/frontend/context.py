"""What a lowering rule sees: the node's arguments as IR values or Python constants,
a Builder positioned at the node's source location, and helpers for the conversions
every rule needs (constants, dtypes, axes, shapes)."""

from __future__ import annotations

import builtins
import os
from collections.abc import Sequence
from typing import Any, Protocol

import attrs
import numpy as np
import torch

from t2n.frontend.dtypes import promote, to_ir
from t2n.frontend.lowering.folding import fold
from t2n.frontend.unsupported import NotConstantError as NotConstantError
from t2n.frontend.unsupported import UnsupportedHere as UnsupportedHere
from t2n.ir import ArrayData, Builder, DType, Graph, SourceLoc, Trait, Value
from t2n.ir.dims import has_sym
from t2n.ir.graph_info import BakedConstant
from t2n.ir.infer_utils import InferError
from t2n.ir.infer_utils import norm_axis as ir_norm_axis
from t2n.torch_data import float8_data


class GraphLowering(Protocol):
    """The lowering of one model as every rule sees it (``ctx.lowering``), whichever
    frontend runs it."""

    graph: Graph
    env: dict[Any, Any]
    """Frontend value (TorchScript value id, FX node) → its lowered value."""
    static_sizes: bool
    """No axis will become symbolic: sizes are Python ints (see :mod:`t2n.frontend.jit.scalars`)."""
    native_ops: frozenset[str]
    """IR ops the target runs as one native operation, which rules write whole."""
    module_writes: dict[tuple[int, str], Any]
    noise_inputs: dict[Any, Value] | None
    """With ``compile(sampling="inputs")``: each random draw's key
    (:meth:`LoweringContext.draw_key`) → the graph input standing for it; else None."""


class ConstantNames(Protocol):
    def name_of_constant(self, t: torch.Tensor, debug_name: str) -> str | None: ...


class ScriptLowering(GraphLowering, Protocol):
    """The jit frontend's lowering (:class:`t2n.frontend.lower.Lowering`), which the rules
    of TorchScript-only nodes (``prim::*``, quantized modules, extracted calls) also use."""

    scope_prefix: str

    @property
    def traced(self) -> ConstantNames: ...

    def parameter(self, t: torch.Tensor, path: str) -> Value: ...

    def state(self, t: torch.Tensor, path: str) -> Any: ...

    def lower_block(self, block: torch._C.Block) -> None: ...


@attrs.define(eq=False)
class ModuleRef:
    """A submodule reached through ``prim::GetAttr``: its dotted path and the object."""

    path: str
    obj: Any


@attrs.define(eq=False)
class Poison:
    """Stands for the outputs of a node that failed to lower (its error is reported once),
    or, with a ``reason``, for an output a rule cannot produce (e.g. the indices of an
    adaptive max pool): reported only if something reads it."""

    reason: str | None = None


_SCHEMA_CACHE: dict[str, list[str]] = {}


def _arg_names(node: torch._C.Node) -> list[str]:
    try:
        text = node.schema()
    except RuntimeError:
        return []
    if text == "(no schema)":
        return []
    if text not in _SCHEMA_CACHE:
        try:
            _SCHEMA_CACHE[text] = [a.name for a in torch._C.parse_schema(text).arguments]
        except RuntimeError:
            _SCHEMA_CACHE[text] = []
    return _SCHEMA_CACHE[text]


def module_path(scope: str, prefix: str) -> str:
    """``__module.model/__module.model.encoder.0`` → ``encoder.0`` (wrapper prefix removed)."""
    last = scope.split("/")[-1] if scope else ""
    last = last.removeprefix("__module.")
    if prefix and (last == prefix.rstrip(".") or last.startswith(prefix)):
        last = last[len(prefix):] if last.startswith(prefix) else ""
    return last if last != "__module" else ""


_TORCH_DIR = os.path.dirname(torch.__file__)
_T2N_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def source_of(node: torch._C.Node) -> str:
    """The innermost frame of the user's code that led to this node (``file.py(12): forward``)."""
    try:
        rng = str(node.sourceRange())
    except RuntimeError:
        return ""
    frames = [f.strip() for f in rng.strip().splitlines() if f.strip()]
    for f in frames:
        path = f.split("(")[0]
        if not path.startswith((_TORCH_DIR, _T2N_DIR)) and "/transformers/utils/" not in path:
            return f[:200]
    return frames[0][:200] if frames else ""


class LoweringContext:
    """Arguments and helpers for the node being lowered. See the rule families in
    ``t2n.frontend.lowering`` for examples."""

    def __init__(self, lowering: ScriptLowering, node: torch._C.Node) -> None:
        self.lowering = lowering
        self.node = node
        self.kind: str = node.kind()
        self.loc = SourceLoc(
            module=module_path(node.scopeName(), lowering.scope_prefix),
            aten=self.kind,
            source=source_of(node),
        )
        self.b = Builder(lowering.graph, self.loc)
        self._inputs = list(node.inputs())
        self._names = _arg_names(node)

    # -- raw access ------------------------------------------------------------------
    @property
    def n_inputs(self) -> builtins.int:
        return len(self._inputs)

    @property
    def n_outputs(self) -> builtins.int:
        return self.node.outputsSize()

    def index(self, key: builtins.int | str) -> builtins.int:
        if isinstance(key, int):
            return key
        try:
            return self._names.index(key)
        except ValueError:
            raise KeyError(f"{self.kind} has no argument {key!r} (arguments: {self._names})") from None

    def has(self, key: builtins.int | str) -> builtins.bool:
        try:
            return self.index(key) < len(self._inputs)
        except KeyError:
            return False

    def raw(self, key: builtins.int | str) -> Any:
        return self.lowering.env[self._inputs[self.index(key)].unique()]

    def torch_value(self, key: builtins.int | str) -> torch._C.Value:
        return self._inputs[self.index(key)]

    def draw_key(self) -> Any:
        """This node's key in ``lowering.noise_inputs`` (its output's name)."""
        return self.node.output().debugName()

    def unsupported(self, reason: str) -> UnsupportedHere:
        """Build the error to ``raise`` for an unsupported form of this op."""
        return UnsupportedHere(reason)

    # -- constants -------------------------------------------------------------------
    def is_none(self, key: builtins.int | str) -> builtins.bool:
        return not self.has(key) or self.raw(key) is None

    def const(self, key: builtins.int | str) -> Any:
        """A Python value known at export time (ints from sizes only if static)."""
        return self.to_const(self.raw(key), str(key))

    def to_const(self, x: Any, what: str = "argument") -> Any:
        if isinstance(x, Value):
            # computed from constants and weights only (a padding from size buffers): known now
            known = x.known if x.known is not None else fold(x)
            if known is None or (known.dtype == object and has_sym(known)):
                raise NotConstantError(f"{self.kind}: {what} must be a constant, but it is computed in the model")
            k = np.asarray(known)
            if x.producer is None or not x.producer.has(Trait.CONSTANT_LIKE):
                # A computed value used as a constant: if it follows an input size, a
                # dynamic axis cannot change it. DynamicAxes reports those.
                self.lowering.graph.info.baked_constants.append(
                    BakedConstant(x, self.loc, f"argument '{what}' of {self.kind}"))
            return k.item() if k.ndim == 0 else k.tolist()
        if isinstance(x, (list, tuple)):
            return type(x)(self.to_const(v, what) for v in x)
        return x

    def int(self, key: builtins.int | str) -> builtins.int:
        return int(self.const(key))

    def float(self, key: builtins.int | str) -> builtins.float:
        return float(self.const(key))

    def bool(self, key: builtins.int | str) -> builtins.bool:
        return bool(self.const(key))

    def ints(self, key: builtins.int | str) -> list[builtins.int]:
        v = self.const(key)
        return [int(v)] if isinstance(v, (int, np.integer)) else [int(x) for x in v]

    def optional(self, key: builtins.int | str) -> Any:
        return None if self.is_none(key) else self.raw(key)

    def dtype_arg(self, key: builtins.int | str) -> DType | None:
        if self.is_none(key):
            return None
        v = self.const(key)
        return to_ir(v)

    # -- tensors ---------------------------------------------------------------------
    def tensor(self, key: builtins.int | str, dtype: DType | None = None) -> Value:
        """The argument as an IR value (Python scalars and lists become constants),
        cast to ``dtype`` if given."""
        return self.as_value(self.raw(key), dtype)

    def optional_tensor(self, key: builtins.int | str, dtype: DType | None = None) -> Value | None:
        return None if self.is_none(key) else self.tensor(key, dtype)

    def as_value(self, x: Any, dtype: DType | None = None) -> Value:
        if isinstance(x, Value):
            return self.b.cast(x, dtype) if dtype is not None else x
        if isinstance(x, (bool, int, float)):
            dt = dtype or (DType.BOOL if isinstance(x, bool) else DType.I64 if isinstance(x, int) else DType.F32)
            return self.b.const(host_array(x, dt), dt)
        if isinstance(x, (list, tuple)):
            if all(isinstance(v, (bool, int, float)) for v in x):
                arr = np.asarray(x)
                dt = dtype or (DType.F32 if arr.dtype.kind == "f" else DType.from_numpy(arr.dtype))
                return self.b.const(host_array(arr, dt), dt)
            parts = [self.b.op("unsqueeze", self.as_value(v, dtype), axes=(0,)) for v in x]
            return self.b.op("concat", *parts, axis=0)
        raise UnsupportedHere(f"{self.kind}: cannot use {type(x).__name__} as a tensor")

    def shape_tensor(self, key: builtins.int | str | Sequence[Any]) -> Value:
        """A list argument of sizes (ints and run-time size values) as a 1-D i64 tensor."""
        items: Any = self.raw(key) if isinstance(key, (builtins.int, str)) else key
        if isinstance(items, Value):
            return self.b.cast(items, DType.I64)
        if isinstance(items, int):
            items = [items]
        if all(isinstance(v, int) for v in items):
            return self.b.ints([int(v) for v in items])
        parts = []
        for v in items:
            if isinstance(v, int):
                parts.append(self.b.ints([v]))
            else:
                parts.append(self.b.op("reshape", self.b.cast(v, DType.I64), self.b.ints([1])))
        return self.b.op("concat", *parts, axis=0)

    # -- types and axes --------------------------------------------------------------
    def operand(self, x: Any) -> tuple[DType, builtins.int] | builtins.bool | builtins.int | builtins.float:
        if isinstance(x, Value):
            return (x.type.dtype, x.rank)
        if isinstance(x, (bool, int, float)):
            return x
        raise UnsupportedHere(f"{self.kind}: unexpected operand {type(x).__name__}")

    def promote(self, *xs: Any) -> DType:
        """PyTorch's result dtype for these operands (IR values or Python scalars)."""
        return promote(*(self.operand(x) for x in xs))

    def promoted(self, *xs: Any, dtype: DType | None = None) -> list[Value]:
        """The operands as IR values of one dtype (PyTorch's promotion unless given)."""
        dt = dtype or self.promote(*xs)
        return [self.as_value(x, dt) for x in xs]

    def axis(self, key: builtins.int | str, rank: builtins.int) -> builtins.int:
        return norm_axis(self.int(key), rank)

    def traced_dtype(self, k: builtins.int = 0) -> DType | None:
        t = self.node.outputsAt(k).type()
        if isinstance(t, torch._C.TensorType):
            name = t.scalarType()
            return to_ir(_scalar_type(name)) if name is not None else None
        return None

    def traced_shape(self, k: builtins.int = 0) -> list[builtins.int] | None:
        t = self.node.outputsAt(k).type()
        if isinstance(t, torch._C.TensorType):
            sizes = t.sizes()
            return list(sizes) if sizes is not None else None
        return None


def _scalar_type(name: str) -> torch.dtype:
    table = {"Float": torch.float32, "Double": torch.float64, "Half": torch.float16,
             "BFloat16": torch.bfloat16, "Long": torch.int64, "Int": torch.int32,
             "Short": torch.int16, "Char": torch.int8, "Byte": torch.uint8, "Bool": torch.bool,
             "UInt16": torch.uint16, "UInt32": torch.uint32, "UInt64": torch.uint64}
    return table[name]


def norm_axis(axis: int, rank: int) -> int:
    """The IR's rule with PyTorch's allowance for scalars (axis 0 or -1), as an
    unsupported-here error the lowering reports with its op."""
    try:
        return ir_norm_axis(axis, max(rank, 1))
    except InferError:
        raise UnsupportedHere(f"axis {axis} is out of range for a tensor of rank {rank}") from None



def array_data(t: torch.Tensor, name: str = "") -> ArrayData:
    """A zero-copy numpy view of a CPU tensor (bf16 as its raw bits; float8 converted)."""
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if (f8 := float8_data(t, name)) is not None:
        return f8
    if t.dtype == torch.bfloat16:
        return ArrayData(t.view(torch.int16).numpy().view(np.uint16), DType.BF16)
    return ArrayData(t.numpy(), to_ir(t.dtype))


def host_array(x: Any, dtype: DType) -> np.ndarray:
    """Python numbers as ``dtype``'s numpy data; bf16 is held as its raw bits (rounded
    to nearest even), not as the number cast to uint16."""
    if dtype is not DType.BF16:
        return np.asarray(x, dtype=dtype.numpy)
    f = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return np.asarray((f + 0x7FFF + ((f >> 16) & 1)) >> 16).astype(np.uint16)
