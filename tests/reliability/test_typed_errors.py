"""Typed errors everywhere: the IR's errors, duplicate rules and emitter failures are
``T2NError`` subclasses (keeping their Python bases, so older ``except`` clauses still
work), name the thing at fault and say what to do.

Bad inputs tried here (30): 11 dimension texts parse_dim cannot read (including
"S$", which used to parse as S, and a non-string); a bad dimension in a printed shape;
a symbol name that is not an identifier; a symbol evaluated without a value; an
ordering of symbolic dims; an unknown IR op (op-set lookup, graph edit); an op schema
registered twice (op set, family table); three bad graph edits (removing a used op,
retyping a non-input, one output of a two-output op); IR text that does not parse; a
graph whose stored types no longer infer; a rule registered twice in a family; a rule
that clashes with a built-in; an emitter registered twice; a user emitter writing a NaN
attribute (compile, and export while weights are written); a user emitter with a bug.
"""

import os
import subprocess
import sys

import pytest
import torch

import t2n
from t2n.backends.nnef.context import DuplicateEmitterError, EmitterTable
from t2n.backends.tract.renderer import TractRenderer
from t2n.errors import EmissionError, IRError, IRLookupError, T2NError
from t2n.frontend.registry import DuplicateRuleError, LoweringRegistry, RuleSet
from t2n.ir import (
    DType,
    Graph,
    GraphEditError,
    IRParseError,
    IRVerificationError,
    OpSet,
    Sym,
    SymbolicComparisonError,
    TensorType,
    parse_dim,
    parse_graph,
    verify,
)
from t2n.ir.dims import DimParseError, UnboundSymbolError
from t2n.ir.infer_utils import InferError
from t2n.ir.schema import DuplicateKeyError, OpTable, UnknownOpError
from t2n.ir.types import Shape


@pytest.mark.parametrize("cls, base", [
    (GraphEditError, ValueError), (IRVerificationError, ValueError), (IRParseError, ValueError),
    (InferError, ValueError), (DimParseError, ValueError), (SymbolicComparisonError, TypeError),
    (UnknownOpError, KeyError), (DuplicateKeyError, KeyError), (UnboundSymbolError, KeyError),
    (DuplicateRuleError, KeyError), (DuplicateEmitterError, KeyError),
])
def test_error_classes_are_typed_and_keep_their_python_base(cls, base):
    assert issubclass(cls, T2NError) and issubclass(cls, base)


def test_the_ir_still_does_not_import_torch():
    code = "import sys, t2n.ir, t2n.ir.verify; assert 'torch' not in sys.modules, 'torch'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=os.getcwd())


@pytest.mark.parametrize("text, why", [
    ("S$", "unexpected '$' at position 1"),
    ("S + 1 #", "unexpected '#'"),
    ("", "it is empty"),
    ("   ", "it is empty"),
    ("(S + 1", "a parenthesis is not closed"),
    ("S)", "unexpected ')' after 'S'"),
    ("S +", "it ends where a value is expected"),
    ("2 / 0", "division by zero"),
    ("3S", "unexpected 'S' after '3'"),
    ("S T", "unexpected 'T'"),
])
def test_parse_dim_refuses_text_it_cannot_read(text, why):
    with pytest.raises(DimParseError) as info:
        parse_dim(text)
    assert f"cannot parse dimension {text!r}" in str(info.value) and why in str(info.value)
    assert isinstance(info.value, IRError) and isinstance(info.value, ValueError)


def test_parse_dim_refuses_a_non_string():
    with pytest.raises(DimParseError, match="text, not int"):
        parse_dim(3)  # type: ignore[arg-type]


@pytest.mark.parametrize("dim", [7, Sym("S"), Sym("S") * 2 + 1, (Sym("S") - 3) // 2, -Sym("B") * Sym("S")])
def test_parse_dim_reads_what_str_prints(dim):
    assert parse_dim(str(dim)) == dim


def test_a_bad_dimension_in_a_printed_shape():
    with pytest.raises(DimParseError, match="' S!': unexpected '!'"):
        Shape.parse("[1, S!, 4]")


def test_symbol_names_and_symbol_values():
    with pytest.raises(DimParseError, match="invalid symbol name '1x'"):
        Sym("1x")
    with pytest.raises(UnboundSymbolError) as info:
        (Sym("S") * 2 + Sym("T")).evaluate({"S": 3})
    assert str(info.value).startswith("symbol T of ") and "given: ['S']" in str(info.value)
    with pytest.raises(SymbolicComparisonError, match="cannot order"):
        _ = Sym("S") < 3


def test_op_set_lookups_and_duplicates():
    with pytest.raises(UnknownOpError) as info:
        OpSet.default().get("no_such_op")
    assert str(info.value).startswith("unknown IR op 'no_such_op'") and "OpSet" in str(info.value)
    assert isinstance(info.value, IRLookupError) and isinstance(info.value, KeyError)
    relu = OpSet.default().get("relu")
    with pytest.raises(DuplicateKeyError, match="already in this op set"):
        OpSet.default().extended([relu])
    table = OpTable("mine")
    table.add(relu)
    with pytest.raises(DuplicateKeyError, match="defined twice in family mine"):
        table.add(relu)


def _graph():
    g = Graph("main")
    x = g.add_input(TensorType(DType.F32, Shape([2, 3])), "x")
    return g, x


def test_graph_edits_that_break_the_graph():
    g, x = _graph()
    y = g.create_op("relu", [x]).output
    g.set_outputs([y])
    with pytest.raises(GraphEditError, match="cannot remove relu: %relu still has users"):
        g.remove(y.producer)
    with pytest.raises(GraphEditError, match="is not a graph input"):
        g.set_input_type(y, x.type)
    with pytest.raises(UnknownOpError, match="no_such_op"):
        g.create_op("no_such_op", [x])
    topk = g.create_op("topk", [x], {"axis": 1, "k": 2, "largest": True})
    with pytest.raises(GraphEditError, match="topk has 2 outputs; use .outputs"):
        _ = topk.output


def test_ir_text_that_does_not_parse():
    with pytest.raises(IRParseError, match="expected 'graph NAME"):
        parse_graph("not a graph")


def test_duplicate_lowering_rules():
    rules = RuleSet("mine")

    def first(ctx):
        return None

    def second(ctx):
        return None

    rules.add("aten::foo", first)
    with pytest.raises(DuplicateRuleError) as info:
        rules.add("aten::foo", second)
    msg = str(info.value)
    assert msg.startswith("aten::foo has two rules in family mine") and "first" in msg and "second" in msg
    with pytest.raises(DuplicateRuleError) as info:
        LoweringRegistry.default().extended({"aten::relu": first})
    assert isinstance(info.value, T2NError) and "pass override=True" in str(info.value)
    assert "aten::relu" in LoweringRegistry.default().extended({"aten::relu": first}, override=True)


def test_duplicate_emitters():
    table = EmitterTable("mine")
    table.add("relu", lambda ctx, op: None)
    with pytest.raises(DuplicateEmitterError, match="emitter for 'relu' defined twice in mine"):
        table.add("relu", lambda ctx, op: None)


class _Body(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU())

    def forward(self, x):
        return self.body(x)


def _nan_attribute(ctx, op):
    ctx.emit(op.output, "relu", op.inputs[0], alpha=float("nan"))


def _buggy(ctx, op):
    return op.no_such_field


def _target_with_relu(emitter):
    """A tract target whose relu emitter is a user's (broken) one."""

    class Custom(t2n.TractNNEF):
        def renderer(self):
            return TractRenderer(self, {**t2n.TractNNEF().emitter_table(), "relu": emitter})

    return Custom()


@pytest.mark.parametrize("emitter, cause", [(_nan_attribute, ValueError), (_buggy, AttributeError)])
def test_an_emitter_failure_names_the_op_module_and_line(emitter, cause):
    with pytest.raises(EmissionError) as info:
        t2n.compile(_Body(), (torch.rand(2, 3),), _target_with_relu(emitter))
    err = info.value
    assert isinstance(err.__cause__, cause)
    assert err.op == "relu" and err.module == "body.1"
    assert os.path.basename(__file__) in err.source
    msg = str(err)
    assert f"emitter {__name__}.{emitter.__name__} failed on IR op 'relu'" in msg
    assert "in module 'body.1'" in msg and "What to do" in msg and cause.__name__ in msg


def test_an_emitter_failure_in_export_leaves_nothing(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU())
    with pytest.raises(EmissionError, match="NaN has no NNEF literal"):
        t2n.export(model, (torch.rand(2, 64),), tmp_path / "m.nnef.tgz", _target_with_relu(_nan_attribute))
    assert os.listdir(tmp_path) == []


def test_verify_lists_an_op_whose_inference_now_fails():
    g = Graph("main")
    a = g.add_input(TensorType(DType.F32, Shape([2, 3])), "a")
    b = g.add_input(TensorType(DType.F32, Shape([2, 3])), "b")
    g.set_outputs([g.create_op("add", [a, b]).output])
    g.set_input_type(b, TensorType(DType.F32, Shape([2, 4])))
    with pytest.raises(IRVerificationError) as info:
        verify(g)
    assert "add -> %add: inference fails: cannot broadcast dimensions 3 and 4" in str(info.value)
