"""Variables holding Q4_0 weights, for tract.

tract reads a Q4_0 ``.dat`` as an opaque block-quantized tensor that only three of its
operations take (tried in tract 0.23.9): ``matmul(x, w, transposeB = true)`` with a
2-D ``w`` (every linear layer; ``x`` in f32 or f16), ``conv`` with ``w`` as its filter
(tract splits it per group and packs it as a [O, I/groups × kernel] matrix; 1-, 2- and
3-D, any stride, dilation and groups), and ``tract_core_gather`` on axis 0
(embeddings), which then needs its output type as ``datum_type``. A linear layer after a
recurrent loop is a rank-3 matmul (``recurrence.py``), which tract does not run on
Q4_0. Anything else
(a transpose, a cast, a matmul without ``transposeB``, a graph output) fails to load
or crashes tract, so a Q4_0 weight with any other reader is written in float, with an
INFO log line naming it and the reader.
"""

from __future__ import annotations

import logging

from t2n.backends.nnef.context import EmitContext, EmitterTable
from t2n.backends.nnef.emit.block_quant import q4_0_data
from t2n.backends.tract.emit.recurrence import after_recurrence
from t2n.ir import Graph, Op, Value
from t2n.quant.q4_0 import as_float

TRACT = EmitterTable("block_quant/tract")


logger = logging.getLogger("t2n.quant")


def _reader_problem(graph: Graph, op: Op, index: int) -> str | None:
    """Why tract cannot take a Q4_0 operand at input ``index`` of ``op`` (None: it can)."""
    if op.kind == "matmul":
        other = op.inputs[0]
        if index == 1 and other.rank > 2 and after_recurrence(graph, other):
            return "a linear layer after a recurrent loop, which tract loads only as a rank-3 matmul"
        if index == 1 and op.attrs.get("transpose_b", False) and not op.attrs.get("transpose_a", False) \
                and op.inputs[1].rank == 2 and other.type.dtype.value in ("f32", "f16"):
            return None
        return "a matmul that does not read it as the transposed right operand of a linear layer"
    if op.kind == "conv" and index == 1 and op.inputs[0].type.dtype.value in ("f32", "f16"):
        return None
    if op.kind == "gather" and index == 0 and int(op.attrs["axis"]) == 0 and op.inputs[0].rank == 2:
        return None
    return f"'{op.kind}'" + (f" ({op.loc.aten})" if op.loc.aten else "")


def q4_0_problem(graph: Graph, v: Value) -> str | None:
    """Why variable ``v`` cannot be written as Q4_0 for tract (None when it can)."""
    if graph.is_output(v):
        return "it is a graph output"
    for op, index in v.uses:
        why = _reader_problem(graph, op, index)
        if why is not None:
            return f"it is read by {why}"
    return None


@TRACT.emitter("variable")
def variable_tract(ctx: EmitContext, op: Op) -> None:
    data = op.attrs["data"]
    blocks = q4_0_data(data)
    if blocks is not None:
        why = q4_0_problem(ctx.graph, op.output)
        if why is None:
            data = blocks
        else:
            logger.info("Q4_0 weight %r is written in float: %s, which tract cannot run on "
                        "4-bit blocks", op.attrs["label"], why)
            data = data if data is not blocks else as_float(blocks)
    ctx.variable_line(ctx.id(op.output), data, op.attrs["label"], op.output.type.dtype)


def is_q4_0_operand(graph: Graph, v: Value) -> bool:
    """True when ``v`` is a variable written as Q4_0 (its readers must say so in tract)."""
    p = v.producer
    return p is not None and p.kind == "variable" and q4_0_data(p.attrs["data"]) is not None \
        and q4_0_problem(graph, v) is None


def gather_datum_type(ctx: EmitContext, op: Op) -> str | None:
    """The ``datum_type`` attribute tract's gather needs on a Q4_0 table (else None)."""
    return op.output.type.dtype.value if is_q4_0_operand(ctx.graph, op.inputs[0]) else None

