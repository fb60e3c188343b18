"""Symbols changed graph-wide: input types, sizes held in constants, symbol names held in
attributes, NNEF statements read back; every type inferred again, the op order kept, and
the assertions rewritten (or dropped once they name no symbol)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

import t2n
from t2n.ir import ArrayData, DType, Graph, Sym, TensorType, verify
from t2n.passes.remodel.symbols import assertion_symbols, rewrite_assertions, substitute_symbols


def _graph() -> Graph:
    g = Graph("g")
    x = g.add_input(TensorType(DType.F32, [1, Sym("S"), 4]), "x")
    sizes = ArrayData(np.array([Sym("S"), 4], dtype=object), DType.I64)
    shape = g.create_op("const", [], {"data": sizes}, names=["shape"]).output
    flat = g.create_op("reshape", [x, shape], names=["flat"]).output
    cached = g.create_op("kv_cache_append", [flat], {"name": "k", "axis": 0, "past": "P"}, names=["cache"]).output
    g.set_outputs([cached])
    return g


def test_a_rename_reaches_constants_attributes_and_types() -> None:
    g = _graph()
    order = [op.kind for op in g.ops()]
    assert substitute_symbols(g, {"S": Sym("T"), "P": Sym("past")}) == 3  # the input, the const, the cache
    verify(g)
    assert [op.kind for op in g.ops()] == order
    assert str(g.outputs[0].type) == "f32[T + past, 4]"
    (cache,) = [op for op in g.ops() if op.kind == "kv_cache_append"]
    assert cache.attrs["past"] == "past"


def test_fixing_a_size_folds_it_in() -> None:
    g = _graph()
    substitute_symbols(g, {"S": 3})
    verify(g)
    assert str(g.inputs[0].type) == "f32[1, 3, 4]" and str(g.outputs[0].type) == "f32[P + 3, 4]"


class Flatten(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x.reshape(x.shape[0], -1)) * 2.0


def test_statements_read_back_are_rewritten_in_place(tmp_path: Path) -> None:
    t2n.compile(Flatten(), (torch.randn(2, 5, 3),), dynamic_axes={"input_0": {0: "B", 1: "T"}}).save(tmp_path / "f")
    model = t2n.read(tmp_path / "f")
    before = model.render().graph_nnef
    assert "shape = [B, 3 * T]" in before
    substitute_symbols(model.graph, {"T": Sym("time"), "B": 1})
    verify(model.graph)
    after = model.render().graph_nnef
    assert after == before.replace("[B, 3 * T]", "[1, 3 * time]").replace("[B, T, 3]", "[1, time, 3]") \
        .replace("extension tract_symbol B;\nextension tract_symbol T;\n", "extension tract_symbol time;\n") \
        .replace("extension tract_assert B >= 1;\nextension tract_assert T >= 1;\n", "extension tract_assert time >= 1;\n")
    x = np.random.default_rng(0).standard_normal((1, 4, 3)).astype(np.float32)
    np.testing.assert_allclose(model.run([x])[0], np.maximum(x.reshape(1, -1), 0) * 2, rtol=1e-6)


def test_assertions_follow_their_symbols() -> None:
    lines = ["tract_assert S + P <= 4096", "tract_assert S >= 1", "tract_assert tg: S == 1", "KHR_x",
             "tract_assert P >= 0"]
    assert rewrite_assertions(lines, {"S": 1}) == ["tract_assert P + 1 <= 4096", "KHR_x", "tract_assert P >= 0"]
    assert rewrite_assertions(lines, {"S": Sym("T")}) == ["tract_assert P + T <= 4096", "tract_assert T >= 1",
                                                         "tract_assert tg: T == 1", "KHR_x", "tract_assert P >= 0"]
    assert rewrite_assertions(["tract_assert A >= 1", "tract_assert B >= 1"], {"A": Sym("N"), "B": Sym("N")}) == \
        ["tract_assert N >= 1"]
    assert assertion_symbols("tract_assert tg: S + P == 1") == {"S", "P"}
