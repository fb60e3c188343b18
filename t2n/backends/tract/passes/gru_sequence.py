"""A GRU direction and its input projection as one ``tract_gru_seq`` op
(:mod:`t2n.backends.tract.ops`), for tract 0.23.9:
``tract_core_gru_seq`` reading the batch-major input and projecting it itself, the form
tract's ONNX loader builds for an ONNX ``GRU``.

The frontend writes a GRU direction as a time-major input projection (``matmul`` by the
input weights, plus their bias) and an ``rnn_scan``; the tract emitter turns that scan into
``tract_core_gru_seq`` with ``projected = 1``. In tract 0.23.9 that ran 1.3x slower than
the ONNX path's ``gru_seq`` (``projected = 0`` on the batch-major input) at 64 hidden, batch
8, 64 steps (0.88 against 0.70 ms of CPU time; removing the transposes around it changed
nothing, projecting inside the kernel did: 0.75 ms; artifact-speed grid, ``rnn
cell=gru``, benchmarks/RESULTS_ARTIFACT_SPEED.md).

The rule: every f32 GRU direction whose step is small enough for tract's fused kernel
(batch x hidden below ``FUSED_BELOW``, or a sequence of at most ``FUSED_STEPS``; otherwise
the loop in standard operations is faster, see :mod:`t2n.backends.tract.emit.rnn`), with a
static batch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from t2n.backends.tract.emit.rnn import fused_pays
from t2n.backends.tract.ops import with_tract_forms
from t2n.ir import Builder, DType, Graph, Op, Value
from t2n.passes.rewrite import Pattern, PatternPass, only_reader, producer_of


@attrs.frozen
class _Gru:
    x: Value  # batch-major [B, T, I], or time-major when ``time_major``
    time_major: bool
    w_ih: Value
    b_ih: Value | None


def _projection(graph: Graph, xw: Value, scan: Op) -> _Gru | None:
    """The input projection ``xw = x @ w_ihᵀ (+ b_ih)`` read only by ``scan``."""
    if not only_reader(graph, xw, scan):
        return None
    b_ih = None
    add = producer_of(xw, "add")
    if add is not None:
        mm, b_ih = add.inputs
        if mm.producer is None or mm.producer.kind != "matmul" or b_ih.rank != 1 or not only_reader(graph, mm, add):
            return None
        xw = mm
    mm_op = producer_of(xw, "matmul")
    if mm_op is None or mm_op.attrs.get("transpose_a") or not mm_op.attrs.get("transpose_b"):
        return None
    x, w_ih = mm_op.inputs
    if x.rank != 3 or w_ih.rank != 2:
        return None
    t = producer_of(x, "transpose")
    if t is not None and tuple(t.attrs["perm"]) == (1, 0, 2):
        return _Gru(t.inputs[0], False, w_ih, b_ih)
    return _Gru(x, True, w_ih, b_ih)


def match(graph: Graph, op: Op, kernels: str = "auto") -> _Gru | None:
    if op.kind != "rnn_scan" or op.attrs["mode"] != "gru" or op.attrs.get("proj"):
        return None
    xw = op.inputs[0]
    steps, batch = xw.type.shape[:2]
    if xw.type.dtype is not DType.F32 or not isinstance(batch, int) or \
            not fused_pays(batch, int(op.attrs["hidden"]), steps, kernels):
        return None
    return _projection(graph, xw, op)


def _or_zeros(b: Builder, v: Value | None, like: Value | None) -> Value:
    """``v``, or zeros shaped like ``like`` (one of the two biases is given)."""
    if v is not None:
        return v
    assert like is not None
    return b.op("mul", like, b.const(0.0, like.type.dtype))


def _sequence(graph: Graph, scan: Op, gru: _Gru) -> Mapping[Value, Value]:
    graph.opset = with_tract_forms(graph.opset)
    b = Builder(graph, scan.loc)
    x = b.op("transpose", gru.x, perm=(1, 0, 2)) if gru.time_major else gru.x
    h0, w_hh = scan.inputs[1], scan.inputs[2]
    b_hh = scan.inputs[3] if len(scan.inputs) > 3 else None
    inputs = [x, gru.w_ih, w_hh, h0]
    if gru.b_ih is not None or b_hh is not None:
        inputs.append(b.op("concat", _or_zeros(b, gru.b_ih, b_hh), _or_zeros(b, b_hh, gru.b_ih), axis=0))
    y, h = b.multi("tract_gru_seq", *inputs, hidden=int(scan.attrs["hidden"]),
                   reverse=bool(scan.attrs.get("reverse")))
    return {scan.outputs[0]: b.op("transpose", y, perm=(1, 0, 2)), scan.outputs[1]: h}


@attrs.frozen
class GruSequence(PatternPass):
    """GRU directions as ``tract_gru_seq`` ops (the input projection inside), where
    ``kernels`` (``TractNNEF(recurrent_kernels=...)``) takes the fused kernel."""

    kernels: str = "auto"
    name = "gru-sequence"

    def patterns(self) -> list[Pattern[Any]]:
        return [Pattern("grus", lambda graph, op: match(graph, op, self.kernels), _sequence)]
