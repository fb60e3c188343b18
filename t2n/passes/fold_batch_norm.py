"""Fold per-channel affine maps (what batch norm becomes at inference) into the conv,
deconv or linear layer that produces their input."""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from t2n.ir import ArrayData, DType, Graph, Op, Value
from t2n.ir.graph import constant_data, is_constant
from t2n.passes.base import PassResult
from t2n.passes.rewrite import Pattern, PatternPass, Replacement, only_reader

_FOLDABLE_DTYPES = (DType.F16, DType.F32, DType.F64)


def is_float_constant(v: Value) -> bool:
    return is_constant(v) and v.type.dtype in _FOLDABLE_DTYPES


def in_memory_weight(v: Value) -> bool:
    """A float constant whose data is already in memory. Weights read lazily from disk
    (``weights_from=``, meta-device models) are never folded: folding would load them
    whole and keep a scaled copy alive, defeating a bigger-than-memory export."""
    p = v.producer
    return is_float_constant(v) and p is not None and isinstance(p.attrs["data"], ArrayData)


def channel_axis(p: Op) -> int | None:
    """The output axis that a producer's weights index, or None if ``p`` cannot absorb
    a per-channel scale (not a layer, or its weight is computed at run time)."""
    if p.kind in ("conv", "deconv") and in_memory_weight(p.inputs[1]):
        return 1
    if p.kind == "matmul" and p.inputs[1].rank == 2 and in_memory_weight(p.inputs[1]):
        return p.output.rank - 1
    return None


def per_channel_vector(c: np.ndarray, out: Value, axis: int) -> np.ndarray | None:
    """``c`` as a vector over ``axis`` of ``out``, if broadcasting it against ``out``
    varies only along that axis and does not grow ``out``."""
    rank = out.rank
    if c.ndim > rank:
        return None
    full = c.reshape((1,) * (rank - c.ndim) + c.shape)
    n = out.type.shape[axis]
    if not isinstance(n, int) or any(d != 1 for i, d in enumerate(full.shape) if i != axis):
        return None
    if full.shape[axis] not in (1, n):
        return None
    return np.broadcast_to(full.reshape(-1), (n,)).astype(np.float64)


def _weight_like(graph: Graph, like: Value, arr: np.ndarray) -> Value:
    """A new constant-like op of ``like``'s kind holding ``arr`` (a weight stays a weight)."""
    p = like.producer
    assert p is not None
    dt = like.type.dtype
    data = ArrayData(np.ascontiguousarray(arr.astype(dt.numpy)), dt)
    attrs_ = {"data": data}
    if p.kind == "variable":
        attrs_["label"] = p.attrs["label"]
    return graph.create_op(p.kind, [], attrs_, names=[like.name], loc=p.loc).output


def _scaled_weight(graph: Graph, p: Op, vec: np.ndarray) -> Value:
    w = p.inputs[1]
    data = constant_data(w)
    assert data is not None
    # f16 scaled in f32; f32 stays f32 (no f64 copy of a big weight)
    wf = data.astype(np.promote_types(data.dtype, np.float32), copy=False)
    vec = vec.astype(wf.dtype)
    if p.kind == "conv":
        out = wf * vec.reshape((-1,) + (1,) * (wf.ndim - 1))
    elif p.kind == "deconv":
        g = int(p.attrs.get("groups", 1))
        cin, og = wf.shape[0], wf.shape[1]
        grouped = wf.reshape((g, cin // g, og) + wf.shape[2:])
        out = (grouped * vec.reshape((g, 1, og) + (1,) * (wf.ndim - 2))).reshape(wf.shape)
    elif p.attrs.get("transpose_b"):
        out = wf * vec[:, None]
    else:
        out = wf * vec[None, :]
    return _weight_like(graph, w, out)


def _vector_const(graph: Graph, vec: np.ndarray, dtype: DType, name: str, p: Op) -> Value:
    data = ArrayData(np.ascontiguousarray(vec.astype(dtype.numpy)), dtype)
    return graph.create_op("const", [], {"data": data}, names=[name], loc=p.loc).output


def _relayer(graph: Graph, p: Op, weight: Value, bias: Value | None) -> Value:
    inputs = [p.inputs[0], weight] + ([bias] if bias is not None else [])
    return graph.create_op(p.schema, inputs, p.attrs, names=[p.output.name], loc=p.loc).output


def constant_operand(op: Op) -> tuple[Value, Value] | None:
    """(the operand computed at run time, the constant one) of a binary op."""
    a, b = op.inputs
    if is_constant(b) and not is_constant(a):
        return a, b
    if is_constant(a) and not is_constant(b):
        return b, a
    return None


@attrs.frozen
class LayerChain:
    """``layer(x)``, or ``add(layer(x), bias)`` with a constant ``bias``."""

    layer: Op
    bias_add: Op | None = None
    bias: Value | None = None

    @property
    def axis(self) -> int:
        axis = channel_axis(self.layer)
        assert axis is not None
        return axis


def layer_chain(graph: Graph, y: Value, reader: Op) -> LayerChain | None:
    """How ``y`` (read by ``reader`` only) comes from a layer, if it does."""
    p = y.producer
    if p is None or not only_reader(graph, y, reader):
        return None
    if channel_axis(p) is not None:
        return LayerChain(p)
    if p.kind != "add":
        return None
    parts = constant_operand(p)
    if parts is None:
        return None
    z, bias = parts
    q = z.producer
    if q is None or z.type != y.type or channel_axis(q) is None or not only_reader(graph, z, p):
        return None
    return LayerChain(q, p, bias)


@attrs.frozen
class _Fold:
    """A fold found around one ``mul`` (scale) or ``add`` (shift) and what it needs."""

    chain: LayerChain
    vec: np.ndarray = attrs.field(eq=False)
    y: Value
    bias_vec: np.ndarray | None = attrs.field(eq=False)
    """The chain's bias ``add`` as a per-channel vector, when it has one."""
    layer_bias: np.ndarray | None = attrs.field(eq=False)
    """The layer's own constant bias (zeros if it has none), where the fold needs it."""


def match_fold(graph: Graph, op: Op) -> _Fold | None:
    """The fold of ``op`` (``mul``/``add`` by a per-channel constant) into the layer that
    makes its other operand, when it is exact (see :class:`FoldBatchNorm`)."""
    if op.kind not in ("mul", "add") or op.output.type.dtype not in _FOLDABLE_DTYPES:
        return None
    parts = constant_operand(op)
    if parts is None or parts[0].type != op.output.type:
        return None
    y, c = parts
    chain = layer_chain(graph, y, op)
    if chain is None:
        return None
    data = constant_data(c)
    vec = None if data is None else per_channel_vector(data, y, chain.axis)
    if vec is None:
        return None
    p = chain.layer
    bvec = _bias_vector(chain, y)
    if chain.bias is not None and bvec is None:
        return None
    if op.kind == "mul":
        has_bias = p.kind != "matmul" and len(p.inputs) > 2
        conv_bias = _layer_bias(p) if has_bias else None
        if has_bias and conv_bias is None:
            return None
        return _Fold(chain, vec, y, bvec, conv_bias)
    if chain.bias_add is not None:
        return _Fold(chain, vec, y, bvec, None)
    if p.kind == "matmul":
        return None  # matmul + constant add is already the linear layer's own form
    old = _layer_bias(p)
    return None if old is None else _Fold(chain, vec, y, None, old)


def _folded(graph: Graph, op: Op, fold: _Fold) -> Replacement:
    return _fold_scale(graph, fold, op) if op.kind == "mul" else _fold_shift(graph, fold, op)


@attrs.frozen
class FoldBatchNorm(PatternPass):
    """``mul(layer(x), s)`` and ``add(layer(x), t)`` with constant per-channel ``s`` and
    ``t`` become one layer with scaled weights and a shifted bias, where the layer is a
    conv, a deconv, or a matmul by a constant 2-D weight (optionally followed by a
    constant bias ``add``, the form of ``nn.Linear``). Folds only where it is exact in
    real arithmetic: the layer's output has no other reader, the constant varies along
    the layer's channel axis only, the weights are float constants. Weights it does
    not change are not copied; a weight other ops also read is left to them."""

    name = "fold-batch-norm"

    def patterns(self) -> list[Pattern[Any]]:
        return [Pattern("folded", match_fold, _folded)]

    def run(self, graph: Graph) -> PassResult:
        result = super().run(graph)
        return PassResult(graph, result.modified, {"folded": result.stats.get("folded", 0)})


def _bias_vector(chain: LayerChain, y: Value) -> np.ndarray | None:
    """The bias of the chain's ``add`` as a per-channel vector (None: not one)."""
    data = None if chain.bias is None else constant_data(chain.bias)
    return None if data is None else per_channel_vector(data, y, chain.axis)


def _layer_bias(p: Op) -> np.ndarray | None:
    """A conv's constant bias (zeros if it has none; None if computed at run time)."""
    if len(p.inputs) < 3:
        channels = p.output.type.shape[1]
        return np.zeros(channels) if isinstance(channels, int) else None
    b = constant_data(p.inputs[2])
    return None if b is None else b.astype(np.float64).reshape(-1)


def _fold_scale(graph: Graph, fold: _Fold, op: Op) -> Replacement:
    """s * (x W + b) = x (W s) + b s."""
    chain, vec, p = fold.chain, fold.vec, fold.chain.layer
    dt = fold.y.type.dtype
    weight = _scaled_weight(graph, p, vec)
    bias_v = (_vector_const(graph, fold.layer_bias * vec, dt, p.inputs[2].name, p)
              if fold.layer_bias is not None else None)
    layer = out = _relayer(graph, p, weight, bias_v)
    if chain.bias_add is not None and chain.bias is not None and fold.bias_vec is not None:
        shifted = _vector_const(graph, fold.bias_vec * vec, dt, chain.bias.name, chain.bias_add)
        out = graph.create_op("add", [layer, shifted], names=[chain.bias_add.output.name],
                              loc=chain.bias_add.loc).output
    # the new layer takes the name of the one it replaces
    return {op.output: out} if layer is out else {op.output: out, p.output: layer}


def _fold_shift(graph: Graph, fold: _Fold, op: Op) -> Replacement:
    """(x W + b) + t = x W + (b + t)."""
    chain, vec, p = fold.chain, fold.vec, fold.chain.layer
    dt = fold.y.type.dtype
    if chain.bias_add is not None and chain.bias is not None and fold.bias_vec is not None:
        shifted = _vector_const(graph, fold.bias_vec + vec, dt, chain.bias.name, chain.bias_add)
        return graph.create_op("add", [p.output, shifted], names=[chain.bias_add.output.name],
                               loc=chain.bias_add.loc).output
    assert fold.layer_bias is not None
    name = p.inputs[2].name if len(p.inputs) > 2 else "bias"
    return _relayer(graph, p, p.inputs[1], _vector_const(graph, fold.layer_bias + vec, dt, name, p))
