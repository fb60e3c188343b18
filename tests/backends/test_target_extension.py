"""User IR ops, emitters, fragments and targets, added from outside the package and
run in the real engines; and every wrong way of adding them refused by name."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import attrs
import numpy as np
import pytest
import torch

import t2n
from t2n.errors import (
    CheckMismatchError,
    EngineError,
    InvalidArgumentError,
    LoweringError,
    NotExpressibleError,
    T2NError,
)
from t2n.ir import DType, OpSet, OpTable

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _example(name: str):
    spec = importlib.util.spec_from_file_location(f"t2n_example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


ir_op = _example("custom_ir_op")
custom_target = _example("custom_target")


def _body(nnef: str) -> str:
    return nnef[nnef.index("graph main"):]


# -- the examples, in tract ------------------------------------------------------------
def test_custom_ir_op_example_runs_in_tract(capsys):
    art = ir_op.main()
    assert art.check().ok
    assert "fragment user_mish(" in art.graph_nnef
    # one call for the activation; the weight's mish was folded by the user's evaluator
    assert _body(art.graph_nnef).count("user_mish(") == 1
    assert "tanh(" not in _body(art.graph_nnef) and "softplus" not in _body(art.graph_nnef)
    assert art.ir.opset is ir_op.OP_SET
    assert "tract" in capsys.readouterr().out


def test_user_evaluator_agrees_with_pytorch():
    x = np.concatenate([np.linspace(-30, 30, 101), [-1e4, 1e4, 0.0]]).astype(np.float32)
    got = ir_op.OP_SET.get("user_mish").evaluate([x], {})[0]
    want = torch.nn.functional.mish(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_user_op_set_leaves_the_built_in_ones_alone():
    assert "user_mish" in ir_op.OP_SET
    assert "user_mish" not in OpSet.default()
    assert "user_mish" not in t2n.TractNNEF().emitter_table()
    assert "user_mish" in ir_op.TARGET.emitter_table()
    art = t2n.compile(ir_op.Gated().eval(), (torch.randn(2, 8),))  # built-in mish rule
    assert "user_mish" not in art.graph_nnef and art.ir.opset is OpSet.default()


def test_user_fragment_on_khronos_runs_in_the_khronos_interpreter(tmp_path):
    (tmp_path / "mish.nnef").write_text(ir_op.MISH_FRAGMENT)
    target = t2n.KhronosNNEF().with_emitters({"user_mish": ir_op.emit_mish},
                                             fragments={"user_mish": tmp_path / "mish.nnef"})
    art = t2n.compile(ir_op.Gated().eval(), (torch.randn(4, 8),), target,
                      registry=ir_op.REGISTRY, op_set=ir_op.OP_SET)
    assert "fragment user_mish(" in art.graph_nnef
    assert art.check().ok


def test_custom_target_example_renders_and_runs_its_own_way(capsys):
    art = custom_target.main()
    assert "sigmoid(" not in _body(art.graph_nnef) and "exp(neg(" in art.graph_nnef
    assert "tract 0.23.9 (in process)" in str(art.check())
    assert "(in process)" in capsys.readouterr().out
    plain = t2n.compile(custom_target.Gate().eval(), (torch.randn(4, 8),))
    assert "sigmoid(" in _body(plain.graph_nnef)


@attrs.frozen
class _LyingTract(t2n.TractNNEF):
    """A target whose engine answers wrongly: check must notice."""

    def run(self, path, inputs, *, registries=(), symbols=None):
        return [o + 1.0 for o in super().run(path, inputs, registries=registries, symbols=symbols)]

    @property
    def engine(self) -> str:
        return "lying tract"


def test_check_runs_the_artifact_with_the_targets_run(tmp_path):
    art = t2n.compile(custom_target.Gate().eval(), (torch.randn(4, 8),), _LyingTract())
    with pytest.raises(CheckMismatchError, match="lying tract") as info:
        art.check(debug_dir=tmp_path / "dbg")
    assert "output_0" in str(info.value)


def test_override_replaces_a_built_in_emitter_and_keeps_the_original_target():
    base = t2n.TractNNEF()
    target = base.with_emitters({"sigmoid": custom_target.sigmoid_from_exp}, override=True)
    assert base.emitter_table()["sigmoid"] is not custom_target.sigmoid_from_exp
    assert not base.emitters and target.emitters == {"sigmoid": custom_target.sigmoid_from_exp}
    art = t2n.compile(custom_target.Gate().eval(), (torch.randn(4, 8),), target, check_io=True)
    assert "sigmoid(" not in _body(art.graph_nnef)


# -- refused, by name --------------------------------------------------------------------
def _noop(ctx, op):
    ctx.emit(op.output, "copy", op.inputs[0])


@pytest.mark.parametrize("emitters, fragments, named", [
    ({"relu": _noop}, None, "'relu'"),                         # replaces a built-in: needs override
    ({"my_op": 3}, None, "emitters['my_op']"),                  # not a function
    ({1: _noop}, None, "key 1"),                                # not an op kind
    ([("my_op", _noop)], None, "dict"),                         # not a mapping
    (None, {"1frag": "fragment 1frag( x: tensor<scalar> ) -> ( y: tensor<scalar> ) {}"}, "'1frag'"),
    (None, {"my_frag": "fragment other( x: tensor<scalar> ) -> ( y: tensor<scalar> ) { y = x; }"},
     "fragment my_frag"),                                       # text defines another fragment
    (None, {"my_frag": 42}, "fragments['my_frag']"),            # neither text nor path
    (None, {"t2n_erf": "fragment t2n_erf( x: tensor<scalar> ) -> ( y: tensor<scalar> ) { y = x; }"},
     "'t2n_erf'"),                                              # replaces a built-in: needs override
])
def test_bad_additions_are_refused_and_the_target_is_unchanged(emitters, fragments, named):
    base = t2n.TractNNEF()
    table = base.emitter_table()
    with pytest.raises(InvalidArgumentError) as info:
        base.with_emitters(emitters, fragments=fragments)
    assert named in str(info.value)
    assert base.emitter_table() == table and not base.emitters and not base.fragments


def test_missing_fragment_file_keeps_the_os_error_as_cause(tmp_path):
    with pytest.raises(InvalidArgumentError, match="missing.nnef") as info:
        t2n.TractNNEF().with_emitters(fragments={"my_frag": tmp_path / "missing.nnef"})
    assert isinstance(info.value.__cause__, OSError)


def test_an_emitter_asking_for_an_unknown_fragment_is_named(tmp_path):
    def emit(ctx, op):
        ctx.emit(op.output, ctx.use_fragment("no_such_fragment"), op.inputs[0])

    target = t2n.TractNNEF().with_emitters({"user_mish": emit})
    with pytest.raises(T2NError, match="no_such_fragment"):
        t2n.compile(ir_op.Gated().eval(), (torch.randn(4, 8),), target,
                    registry=ir_op.REGISTRY, op_set=ir_op.OP_SET)


def test_a_user_op_without_an_emitter_is_not_expressible():
    with pytest.raises(NotExpressibleError, match="user_mish") as info:
        t2n.compile(ir_op.Gated().eval(), (torch.randn(4, 8),), registry=ir_op.REGISTRY,
                    op_set=ir_op.OP_SET)
    assert "aten::mish" in str(info.value)


def test_a_rule_making_an_op_outside_the_op_set_names_it():
    with pytest.raises(LoweringError, match="unknown IR op 'user_mish'") as info:
        t2n.compile(ir_op.Gated().eval(), (torch.randn(4, 8),), ir_op.TARGET, registry=ir_op.REGISTRY)
    assert "aten::mish" in str(info.value) and "custom_ir_op.py" in str(info.value)


@pytest.mark.parametrize("op_set, named", [("default", "str"), (ir_op.USER_OPS, "OpTable")])
def test_compile_refuses_an_op_set_that_is_not_one(op_set, named, tmp_path):
    model = ir_op.Gated().eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(InvalidArgumentError, match="op_set") as info:
        t2n.compile(model, (torch.randn(4, 8),), op_set=op_set)
    assert named in str(info.value)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_op_set_duplicates_and_non_schemas_are_refused():
    again = OpTable("again")
    again.op("user_mish")(ir_op.infer_mish)
    with pytest.raises(KeyError, match="override=True"):
        ir_op.OP_SET.extended(again)
    assert ir_op.OP_SET.extended(again, override=True).get("user_mish").evaluate is None
    assert ir_op.OP_SET.get("user_mish").evaluate is ir_op.mish_numpy
    with pytest.raises(InvalidArgumentError, match="OpSchema"):
        OpSet.default().extended(["user_mish"])  # type: ignore[list-item]


def test_identifier_rules_belong_to_the_target():
    assert t2n.TractNNEF.identifier_rules.problem("inf_x")
    assert not t2n.KhronosNNEF.identifier_rules.problem("inf_x")
    art = t2n.compile(custom_target.Gate().eval(), (torch.randn(4, 8),), t2n.KhronosNNEF(),
                      input_names=["inf_x"])
    assert art.input_names == ["inf_x"] and art.check().ok
    with pytest.raises(InvalidArgumentError, match="inf_x"):
        t2n.compile(custom_target.Gate().eval(), (torch.randn(4, 8),), input_names=["inf_x"])


class _BareTarget(t2n.Target):
    """A target written from the base class: standard NNEF, run by the Khronos interpreter."""

    version = "1.0.5"
    bf16_as = DType.F32
    name = "bare"

    def renderer(self):
        from t2n.backends.khronos.renderer import KhronosRenderer

        return KhronosRenderer(self, t2n.KhronosNNEF().builtin_emitters())

    def run(self, path, inputs, *, registries=(), symbols=None):
        return t2n.KhronosNNEF().run(path, inputs)


def test_a_target_written_from_the_base_class_renders_and_runs():
    target = _BareTarget()
    art = t2n.compile(custom_target.Gate().eval(), (torch.randn(4, 8),), target)
    assert art.check().ok and "tract" not in art.graph_nnef
    with pytest.raises(InvalidArgumentError, match="attrs.frozen"):
        target.with_emitters({"user_mish": _noop})
    with pytest.raises(InvalidArgumentError, match="custom_extensions"):
        t2n.compile(custom_target.Gate().eval(), (torch.randn(4, 8),), target,
                    custom_extensions=["tract_assert S >= 1"])


@attrs.frozen
class _BrokenTract(t2n.TractNNEF):
    """A target whose run fails the way a user's code might."""

    mode: str = "raises"

    def run(self, path, inputs, *, registries=(), symbols=None):
        if self.mode == "raises":
            raise RuntimeError("the engine library is missing a symbol")
        return None


@pytest.mark.parametrize("mode, message", [("raises", "RuntimeError: the engine library is missing a symbol"),
                                            ("returns", "returned NoneType")])
def test_a_failing_user_run_is_an_engine_error_naming_the_target(mode, message):
    art = t2n.compile(custom_target.Gate().eval(), (torch.randn(4, 8),), _BrokenTract(mode=mode))
    with pytest.raises(EngineError, match="_BrokenTract") as info:
        art.check()
    assert message in str(info.value)
    if mode == "raises":
        assert isinstance(info.value.__cause__, RuntimeError)
