"""The NNEF parser and the canonical printer: what t2n writes prints back the same;
other spellings (single quotes, ``i"..."`` names, operators) parse to the same tree."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from t2n.backends.nnef.context import nnef_float
from t2n.backends.nnef.reader.parser import (
    parse_document,
    parse_expression,
    parse_fragment,
    parse_quant,
)
from t2n.backends.nnef.reader.tree import (
    Binary,
    Call,
    Dim,
    Ident,
    Literal,
    Slot,
    Tuple,
    fold_sizes,
    to_text,
)
from t2n.errors import NNEFSyntaxError
from t2n.ir import Sym
from t2n.ir.dims import parse_dim

T2N_LINES = [
    'conv(x, w, b, border = "constant", padding = [(1, 1)], stride = [1], dilation = [1], groups = 1)',
    'tract_core_cast(tract_core_shape_of(x), to = "i64")',
    "mul(add(gelu_erf, 1.0), 0.5)",
    "clamp(x, -4.0, 4.0)",
    "add(x, -inf)",
    'concat([sub(b, b), b], axis = 0)',
    'tract_core_scan(body = "t2n_lstm_body_0", scan = [("xw", l_add, 0, 1)], full = [], '
    'state = [("h", h0, "h_out")], output = [("y", "full", 0, -1)])',
    "cast<scalar>(x)",
    'variable<scalar>(shape = [24, 8], label = "constants/l_weight")',
    'select(m, x, tract_core_cast(0.5, to = "f16"))',
    'f(s = "quote \\" and backslash \\\\")',
    "reshape(x, shape = [1, S, 2 * S + 1])",
]


@pytest.mark.parametrize("text", T2N_LINES)
def test_what_t2n_writes_prints_back_the_same(text: str) -> None:
    assert to_text(parse_expression(text)) == text


def test_other_spellings_parse_to_the_same_tree() -> None:
    assert parse_expression("f('a', i\"my.name\")") == Call("f", (Literal("a"), Ident("my.name")))
    assert parse_expression("-1") == Literal(-1)
    assert parse_expression("a + b * c") == Binary("+", Ident("a"), Binary("*", Ident("b"), Ident("c")))
    assert to_text(parse_expression("(a + b) * c")) == "(a + b) * c"
    assert to_text(parse_expression("a ^ b ^ c")) == "a ^ b ^ c"
    assert parse_expression("(1, $2)") == Tuple((Literal(1), Slot(2)))


@pytest.mark.parametrize("dim", ["S", "2 * S + 1", "S - 3", "(S - 3) / 2", "S * P + 4"])
def test_sizes_fold_to_their_canonical_text(dim: str) -> None:
    e = fold_sizes(parse_expression(f"[{dim}, 3]"), lambda n: True)
    assert to_text(e) == f"[{parse_dim(dim)}, 3]"
    assert isinstance(e.items[0], Dim) and e.items[0].value == parse_dim(dim)  # type: ignore[attr-defined]


@given(st.floats(allow_nan=False, width=32) | st.floats(allow_nan=False))
def test_float_literals_survive_reading(x: float) -> None:
    text = nnef_float(x)
    value = parse_expression(text)
    assert isinstance(value, Literal) and (value.value == x or (math.isinf(x) and value.value == x))
    assert to_text(value) == text


def test_a_document_keeps_fragment_text_and_extension_lines() -> None:
    doc = parse_document("version 1.0;\nextension tract_registry tract_core;\nextension KHR_a, KHR_b;\n"
                         "fragment f( x: tensor<scalar>, k: integer[] = [] ) -> ( y: tensor<scalar> )\n"
                         "{\n    y = x;\n}\n\n# a comment\ngraph g(a) -> (b) { a = external(shape = [1]); "
                         "(b, c) = f(a); }\n")
    assert doc.extensions == ("tract_registry tract_core", "KHR_a, KHR_b")
    (frag,) = doc.fragments
    assert frag.text.startswith("fragment f(") and frag.text.endswith("}")
    assert [p.name for p in frag.params] == ["x", "k"] and frag.params[1].default is not None
    assert doc.graph.body[1].targets == ("b", "c") and doc.graph.body[1].form == "tuple"
    assert parse_fragment(frag.text) == frag


def test_graph_quant_entries() -> None:
    q = parse_quant('"w": zero_point_linear_quantize(zero_point = 0, scale = 0.5, bits = 8, signed = true, '
                    'symmetric = false);\n"x.y": linear_quantize(min = 0.0, max = 1.0, bits = 8);\n')
    assert list(q) == ["w", "x.y"]
    assert to_text(q["w"]) == ("zero_point_linear_quantize(zero_point = 0, scale = 0.5, bits = 8, signed = true, "
                               "symmetric = false)")


@pytest.mark.parametrize("text, where", [
    ("version 1.0;\ngraph g(a) -> (b)\n{\n    b = a if a else a;\n}\n", ":4: expected ';'"),
    ("version 1.0;\ngraph g(a) -> (b)\n{\n    b = [for x in a yield x];\n}\n", ":4: expected an expression"),
    ("version 1.0;\ngraph g(a) -> (b)\n{\n    b = f(a;\n}\n", ":4: expected ','"),
    ("graph g(a) -> (b) {}", ":1: expected 'version'"),
])
def test_what_is_not_read_names_the_line(text: str, where: str) -> None:
    with pytest.raises(NNEFSyntaxError, match=where):
        parse_document(text, "graph.nnef")


def test_symbols_are_not_tensors() -> None:
    assert fold_sizes(parse_expression("[S]"), lambda n: False) == parse_expression("[S]")
    assert fold_sizes(parse_expression("[S]"), lambda n: n == "S").items[0] == Dim(Sym("S"))  # type: ignore[attr-defined]
