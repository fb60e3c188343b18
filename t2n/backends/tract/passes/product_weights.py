"""A large weight that a matrix product shares with other readers gets a transposed copy
of its own for the product.

tract packs a product's constant operand once, when it optimises the model, only where
it can fold the packing: its constant folding (``PropConst``) leaves a constant alone
when it has several readers and is larger than its budget (4 MiB in 0.23), so that a
big weight is not duplicated per reader. A weight read by a gather and by a product —
the embedding matrix tied to the output projection of most language models, Whisper,
Marian, T5... — is then packed again at every call: a token of a tied one-layer Llama
(vocab 32000, width 512) took 105 ms against 5.2 ms untied (benchmarks/RESULTS_SEQ2SEQ.md).

Writing the product's operand as the weight's transpose (and flipping the product's
transpose flag) gives tract a constant with one reader, packed once at load; the copy
has different bytes, so nothing takes it for the original. It costs that weight's size
once more on disk. A weight read by several products (shared layers) is left as it is:
a copy per product would multiply its size, which a model sharing weights chose not to
pay. A weight read through casts (f16 weights computed in f32) or a transpose (``x @
W.t()``) is copied in the same way: the casts kept on the copy, the transpose done by it.
"""

from __future__ import annotations

from typing import Any

import attrs

from t2n.ir import Builder, DType, Graph, Op, Value
from t2n.ir.tensor_views import SwappedLastAxesData
from t2n.passes.rewrite import Pattern, PatternPass

TRACT_FOLD_BUDGET = 4 << 20
"""Bytes above which tract does not fold a constant that has several readers."""

_COPIED = frozenset({DType.F16, DType.F32, DType.F64, DType.BF16})


@attrs.frozen
class SharedOperand:
    """The product's operand ``index`` reads ``weight`` through ``steps`` (casts and
    transposes of the last two axes, each read by the next alone; product side first)."""

    index: int
    weight: Op
    steps: tuple[Op, ...]


def _is_step(op: Op) -> bool:
    """A cast, or a transpose that swaps the last two axes and keeps the others."""
    if op.kind == "cast":
        return True
    if op.kind != "transpose":
        return False
    perm = list(op.attrs["perm"])
    n = len(perm)
    return n >= 2 and perm == [*range(n - 2), n - 1, n - 2]


def _weight_behind(v: Value, product: Op) -> tuple[Op, tuple[Op, ...]] | None:
    """The variable ``v`` is made from through casts and transposes that nothing else
    reads, with those steps."""
    steps: list[Op] = []
    reader = product
    p = v.producer
    while p is not None and _is_step(p) and all(user is reader for user, _ in p.output.uses):
        steps.append(p)
        reader, p = p, p.inputs[0].producer
    if p is None or p.kind != "variable":
        return None
    return p, tuple(steps)


def match(graph: Graph, op: Op) -> SharedOperand | None:
    """A product operand whose weight is big, plain float data of rank 2 or more, read by
    other ops too, and by no other product."""
    if op.kind != "matmul":
        return None
    for index, v in enumerate(op.inputs[:2]):
        found = _weight_behind(v, op)
        if found is None:
            continue
        weight, steps = found
        w = weight.output
        data = weight.attrs["data"]
        if w.type.quant is not None or data.dtype not in _COPIED or len(data.shape) < 2:
            continue
        if data.nbytes <= TRACT_FOLD_BUDGET or graph.is_output(w):
            continue
        direct = steps[-1] if steps else op
        others = [user for user, _ in w.uses if user is not direct]
        if not others or any(_reaches_a_product(graph, r) for r in others):
            continue
        return SharedOperand(index, weight, steps)
    return None


def _reaches_a_product(graph: Graph, reader: Op) -> bool:
    """``reader`` is a product, or a cast or transpose whose value reaches one (another
    product's copy would make one more copy of the weight)."""
    if reader.kind == "matmul":
        return True
    return _is_step(reader) and any(_reaches_a_product(graph, user) for user, _ in reader.output.uses)


def transposed_copy(graph: Graph, op: Op, found: SharedOperand) -> Value:
    """The product reading a transposed copy of the weight: the transposes on its way
    dropped and the product's transpose flag flipped when they were an even number (the
    copy is their work done once), its casts kept."""
    b = Builder(graph, op.loc)
    weight = found.weight
    label = f"{weight.attrs['label']}.transposed"
    copy = b.variable(SwappedLastAxesData(weight.attrs["data"]), label, name=f"{weight.output.name}_transposed")
    for step in reversed(found.steps):
        if step.kind == "cast":
            copy = b.cast(copy, step.attrs["to"])
    inputs = list(op.inputs)
    inputs[found.index] = copy
    attrs_ = dict(op.attrs)
    if sum(step.kind == "transpose" for step in found.steps) % 2 == 0:
        flag = "transpose_a" if found.index == 0 else "transpose_b"
        attrs_[flag] = not bool(op.attrs.get(flag, False))
    return graph.create_op("matmul", inputs, attrs_, loc=op.loc).output


@attrs.frozen
class UntieProductWeights(PatternPass):
    """Products whose big weight is shared with other readers read a transposed copy
    (tract packs it once instead of at every call)."""

    name = "untie-product-weights"

    def patterns(self) -> list[Pattern[Any]]:
        return [Pattern("copied_weights", match, transposed_copy)]


__all__ = ["TRACT_FOLD_BUDGET", "UntieProductWeights"]
