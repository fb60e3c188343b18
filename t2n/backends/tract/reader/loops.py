"""tract's loops and recurrent kernels: ``tract_core_scan`` (a fragment run once per
chunk of its scanned inputs), ``tract_core_gru_seq`` and the fused gate epilogues; and
the transformer and extra operations, whose results follow their first input."""

from __future__ import annotations

from typing import Any

from t2n.backends.nnef.reader.optable import Args, ReadOpTable, TensorVal, tensor
from t2n.ir import Sym
from t2n.ir.dims import Dim

TRACT = ReadOpTable("loops/tract")


def _entries(a: Args, name: str, size: int) -> list[tuple[Any, ...]]:
    v = a.raw(name)
    if not isinstance(v, (list, tuple)) or not all(isinstance(e, tuple) and len(e) == size for e in v):
        raise a.fail(f"argument {name} must be a list of {size}-tuples")
    return list(v)


@TRACT.op("tract_core_scan", "body, scan, full, state, output, skip = 0, reset_every_turn = 0, external_state = 0")
def _scan(a: Args) -> list[TensorVal]:
    """Scanned inputs reach the body one chunk (``|step|`` long on their axis) per turn,
    full inputs whole, states as their initial value; a ``full`` output stacks the
    body's result of every turn on its axis, a ``last`` one is the last turn's."""
    body = a.text("body")
    params: dict[str, TensorVal] = {}
    turns: Dim | None = None
    for name, x, axis, step in _entries(a, "scan", 4):
        dims = list(x.shape)
        chunk = abs(int(step))
        turns = (dims[axis] + (chunk - 1)) // chunk if turns is None else turns
        dims[axis] = chunk
        params[name] = tensor(x.dtype, dims)
    for name, x in _entries(a, "full", 2):
        params[name] = x
    for name, init, _ in _entries(a, "state", 3):
        params[name] = init
    if a.context is None:
        raise a.fail("a scan needs the document's fragments")
    results = a.context.run_fragment(body, params)
    out: list[TensorVal] = []
    for name, mode, axis, _step in _entries(a, "output", 4):
        if name not in results:
            raise a.fail(f"the body {body!r} has no result {name!r}")
        r = results[name]
        if mode == "full":
            if turns is None:
                raise a.fail("a 'full' output needs a scanned input")
            dims = list(r.shape)
            dims[axis] = dims[axis] * turns
            out.append(tensor(r.dtype, dims))
        else:
            out.append(TensorVal(r.type))
    return out


@TRACT.op("tract_core_gru_seq", "x, w = 0.0, r = 0.0, b = 0.0, initial_h = 0.0, hidden = 0, chunk = 1, has_bias = 0, "
                              "reset_every_turn = 0, emit_y = 1, projected = 0")
def _gru_seq(a: Args) -> list[TensorVal]:
    """x is [batch, time, 3·hidden] (or [batch, time, input] with ``w`` when tract projects
    it); y is [batch, time, hidden], the last h [batch, 1, hidden]."""
    x, h = a.tensor("x"), a.integer("hidden")
    return [tensor(x.dtype, [x.shape[0], x.shape[1], h]), tensor(x.dtype, [x.shape[0], 1, h])]


@TRACT.op("tract_core_lstm_epilogue", "preact, c_prev, hidden")
def _lstm_epilogue(a: Args) -> list[TensorVal]:
    c = a.tensor("c_prev")
    return [TensorVal(c.type), TensorVal(c.type)]


@TRACT.op("tract_core_gru_epilogue", "xh, rh, h_prev, hidden")
def _gru_epilogue(a: Args) -> list[TensorVal]:
    return [TensorVal(a.tensor("h_prev").type)]


@TRACT.op(["tract_transformers_apply_rope"], "input, cos, sin")
def _rope(a: Args) -> list[TensorVal]:
    return [TensorVal(a.tensor("input").type)]


@TRACT.op("tract_transformers_scaled_masked_softmax", "input, mask, scale = 1.0, post_softmax_mask = false")
def _masked_softmax(a: Args) -> list[TensorVal]:
    return [TensorVal(a.tensor("input").type)]


@TRACT.op("tract_transformers_sdpa", "q, k, v, mask = false, scale = 0.0, datum_type = '', acc_datum_type = '', "
                                   "is_causal = false")
def _sdpa(a: Args) -> list[TensorVal]:
    q, v = a.tensor("q"), a.tensor("v")
    return [tensor(q.dtype, [*q.shape[:-1], v.shape[-1]])]


@TRACT.op("tract_transformers_dyn_kv_cache", "input, name, axis, datum_type = '', past_sequence_shape = [], "
                                          "input_sequence_shape = []", stateful=True)
def _kv_cache(a: Args) -> list[TensorVal]:
    """The cache grows along ``axis``: its past length (a symbol of
    ``past_sequence_shape``) plus the input's."""
    x, axis = a.tensor("input"), a.integer("axis")
    past = a.dims("past_sequence_shape")
    dims = list(x.shape)
    dims[axis] = (past[axis] if past else Sym("P")) + dims[axis]
    return [tensor(x.dtype, dims)]


@TRACT.op(["tract_extra_exp_unit_norm", "tract_extra_exp_mean_norm"],
        "input, state = 0.0, axis = 0, alpha = 0.0, skip = 0, stateless = false, complex = false, "
        "epsilon = 0.0, scaling_factor = 1.0")
def _extra_norm(a: Args) -> list[TensorVal]:
    return [TensorVal(a.tensor("input").type)]
