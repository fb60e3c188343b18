"""Dynamic sizes through the torch.export frontend: ``dynamic_axes`` (t2n's spelling) or
``dynamic_shapes`` (torch's) become the program's symbols, named as the user named them,
with range constraints as ``tract_assert`` lines; each artifact runs in tract at several
sizes against PyTorch."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from torch import nn
from torch.export import Dim

import t2n
from t2n.errors import DynamicAxesError, ExportSpecializationError, InvalidArgumentError
from t2n.passes.dynamic_axes import BakedSizeWarning


def _check_at(art, model, make_args, sizes):
    """Run ``art`` in tract at each size (inputs of that size, then with the symbols set)."""
    for size in sizes:
        args = make_args(**size)
        with torch.no_grad():
            out = model(*args)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        ins = [a.numpy() for a in args]
        refs = [o.numpy() for o in outs]
        assert art.check(inputs=ins, expected=refs).ok
        assert art.check(inputs=ins, expected=refs, symbols=dict(size)).ok


def _extensions(art):
    return [ln.strip() for ln in art.rendered.graph_nnef.splitlines() if ln.startswith("extension")]


class Cat(nn.Module):
    def forward(self, x, y):
        z = torch.cat([x, y], 1)
        b, t, d = z.shape
        return z.reshape(b, t * d) + 1, z.reshape(b * t, d)[: t - 1]


def test_linear_over_a_dynamic_sequence_runs_at_every_size():
    torch.manual_seed(0)
    model = nn.Linear(8, 4).eval()
    art = t2n.compile(model, (torch.randn(2, 5, 8),), frontend="export", dynamic_axes={"input_0": {1: "S"}})
    assert [str(d) for d in art.ir.inputs[0].type.shape] == ["2", "S", "8"]
    assert "extension tract_symbol S;" in _extensions(art)
    # torch.export assumes dynamic sizes are never 0 or 1; the graph does not depend on it,
    # so S = 1 stays allowed (tract's default S >= 1) and runs like PyTorch.
    assert "extension tract_assert S >= 1;" in _extensions(art)
    _check_at(art, model, lambda S: (torch.randn(2, S, 8),), [{"S": 1}, {"S": 3}, {"S": 17}])


def test_two_inputs_sharing_a_symbol_and_sizes_derived_from_it():
    torch.manual_seed(0)
    art = t2n.compile(Cat(), (torch.randn(2, 5, 8), torch.randn(2, 5, 8)), frontend="export",
                      dynamic_axes={"input_0": {1: "S"}, "input_1": {1: "S"}})
    assert [str(v.type) for v in art.ir.outputs] == ["f32[2, 16 * S]", "f32[2 * S - 1, 8]"]
    assert [ln for ln in _extensions(art) if "tract_symbol" in ln] == ["extension tract_symbol S;"]
    _check_at(art, Cat(), lambda S: (torch.randn(2, S, 8), torch.randn(2, S, 8)), [{"S": 2}, {"S": 9}])


def test_range_constrained_dim_becomes_tract_assert_lines():
    torch.manual_seed(0)
    model = nn.Linear(8, 4).eval()
    seq = Dim("seq", min=3, max=64)
    art = t2n.compile(model, (torch.randn(2, 5, 8),), frontend="export", dynamic_shapes=({1: seq},))
    ext = _extensions(art)
    assert "extension tract_assert seq >= 3;" in ext and "extension tract_assert seq <= 64;" in ext
    assert "extension tract_assert seq >= 1;" not in ext  # the Dim's own minimum replaces the default
    _check_at(art, model, lambda seq: (torch.randn(2, seq, 8),), [{"seq": 3}, {"seq": 64}])


def test_derived_dim_in_torch_form_names_the_root_symbol():
    x, y = torch.randn(2, 5, 8), torch.randn(2, 10, 8)
    half = Dim("H", min=2, max=32)

    class TwoLengths(nn.Module):
        def forward(self, a, b):
            return torch.cat([a, a], 1) + b

    art = t2n.compile(TwoLengths(), (x, y), frontend="export", dynamic_shapes=({1: half}, {1: 2 * half}))
    assert [str(d) for d in art.ir.inputs[1].type.shape] == ["2", "2 * H", "8"]
    assert "extension tract_assert H >= 2;" in _extensions(art)  # asked explicitly
    _check_at(art, TwoLengths(), lambda H: (torch.randn(2, H, 8), torch.randn(2, 2 * H, 8)), [{"H": 3}])


def test_range_torch_needs_is_taken_from_its_suggestion_and_asserted():
    """A position table of 16 rows: torch.export refuses an unbounded S and suggests
    ``S <= 16``; the export takes that range and says it in graph.nnef."""

    class Positions(nn.Module):
        def __init__(self):
            super().__init__()
            self.pos = nn.Parameter(torch.randn(16, 4))

        def forward(self, x):
            return x + self.pos[: x.shape[1]]

    model = Positions().eval()
    art = t2n.compile(model, (torch.randn(1, 5, 4),), frontend="export", dynamic_axes={"input_0": {1: "S"}})
    assert "extension tract_assert S <= 16;" in _extensions(art)
    _check_at(art, model, lambda S: (torch.randn(1, S, 4),), [{"S": 2}, {"S": 16}])


def test_nested_dict_input_axes_by_their_compile_names():
    class Nested(nn.Module):
        def forward(self, x, extra):
            return x * 2 + extra["bias"].sum(1, keepdim=True)

    args = (torch.randn(3, 6), {"bias": torch.randn(3, 4)})
    art = t2n.compile(Nested(), args, frontend="export", dynamic_axes={"input_0": {1: "W"}, "input_1_bias": {1: "K"}})
    assert [str(v.type) for v in art.ir.inputs] == ["f32[3, W]", "f32[3, K]"]
    x, bias = torch.randn(3, 9), torch.randn(3, 2)
    ref = Nested()(x, {"bias": bias}).numpy()
    assert art.check(inputs=[x.numpy(), bias.numpy()], expected=[ref]).ok


def test_exported_program_given_keeps_its_dim_names():
    model = nn.Linear(8, 4).eval()
    program = torch.export.export(model, (torch.randn(2, 5, 8),), dynamic_shapes=({1: Dim("tokens")},))
    art = t2n.compile(program, (torch.randn(2, 5, 8),), frontend="export")
    assert [str(d) for d in art.ir.inputs[0].type.shape] == ["2", "tokens", "8"]
    _check_at(art, model, lambda tokens: (torch.randn(2, tokens, 8),), [{"tokens": 7}])


# -- what is refused or reported ----------------------------------------------------------


def test_a_size_the_model_fixes_names_input_axis_and_how_to_relax():
    class Fixes(nn.Module):
        def forward(self, x):
            return x.reshape(2, 40)

    with pytest.raises(ExportSpecializationError) as info:
        t2n.compile(Fixes(), (torch.randn(2, 5, 8),), frontend="export", dynamic_axes={"input_0": {1: "S"}})
    err = info.value
    assert isinstance(err, DynamicAxesError)  # what jit users already catch
    assert (err.input, err.axis) == ("input_0", 1)
    text = str(err)
    assert "input 'input_0' axis 1" in text and "constant (5)" in text
    assert "drop it from dynamic_axes" in text and 'frontend="jit"' in text
    assert type(err.__cause__).__name__ == "UserError"


def test_example_of_size_one_on_a_dynamic_axis_says_to_trace_larger():
    with pytest.raises(ExportSpecializationError, match="size 2 or more"):
        t2n.compile(nn.Linear(8, 4), (torch.randn(2, 1, 8),), frontend="export", dynamic_axes={"input_0": {1: "S"}})


def test_two_symbols_the_model_makes_equal_are_both_named():
    class Add(nn.Module):
        def forward(self, x, y):
            return x + y

    with pytest.raises(ExportSpecializationError) as info:
        t2n.compile(Add(), (torch.randn(5), torch.randn(5)), frontend="export",
                    dynamic_axes={"input_0": {0: "A"}, "input_1": {0: "B"}})
    text = str(info.value)
    assert "input 'input_0' axis 0 (symbol A)" in text and "input 'input_1' axis 0 (symbol B)" in text
    assert "same symbol name" in text


def test_axes_a_given_program_holds_static_are_baked_sizes():
    model = nn.Linear(8, 4).eval()
    program = torch.export.export(model, (torch.randn(2, 5, 8),))
    with pytest.warns(BakedSizeWarning, match="input 'input_0' axis 1: torch.export made it the constant 5"):
        art = t2n.compile(program, (torch.randn(2, 5, 8),), frontend="export", dynamic_axes={"input_0": {1: "S"}})
    assert [str(d) for d in art.ir.inputs[0].type.shape] == ["2", "5", "8"]
    with pytest.raises(DynamicAxesError, match="input 'input_0' axis 1"):
        t2n.compile(program, (torch.randn(2, 5, 8),), frontend="export", dynamic_axes={"input_0": {1: "S"}},
                    strict_dynamic_axes=True)


def test_dim_auto_that_torch_specialises_is_a_baked_size():
    with pytest.warns(BakedSizeWarning, match=r"axis 1 \(asked as Dim.AUTO\).*constant 1.*size 2 or more"):
        t2n.compile(nn.Linear(8, 4), (torch.randn(2, 1, 8),), frontend="export", dynamic_shapes=({1: Dim.AUTO},))


@pytest.mark.parametrize("options, message", [
    (dict(frontend="export", dynamic_axes={"input_0": {1: "S"}}, dynamic_shapes=({1: Dim("S")},)), "not both"),
    (dict(frontend="jit", dynamic_shapes=({1: Dim("S")},)), 'is for frontend="export"'),
    (dict(frontend="export", dynamic_shapes="S"), "dynamic_shapes must be a tuple"),
])
def test_bad_dynamic_options_are_refused(options, message):
    with pytest.raises(InvalidArgumentError, match=message):
        t2n.compile(nn.Linear(8, 4), (torch.randn(2, 5, 8),), **options)


def test_dynamic_shapes_for_a_given_program_is_refused():
    program = torch.export.export(nn.Linear(8, 4), (torch.randn(2, 5, 8),))
    with pytest.raises(InvalidArgumentError, match="pass dynamic_shapes to torch.export.export"):
        t2n.compile(program, (torch.randn(2, 5, 8),), frontend="export", dynamic_shapes=({1: Dim("S")},))


@pytest.mark.parametrize("axes, message", [
    ({"nope": {1: "S"}}, "names input 'nope'"),
    ({"input_0": {3: "S"}}, "out of range"),
    ({"input_0": {1: "1S"}}, "not a symbol name"),
])
def test_bad_dynamic_axes_are_refused_before_torch_export_runs(axes, message):
    with pytest.raises(DynamicAxesError, match=message):
        t2n.compile(nn.Linear(8, 4), (torch.randn(2, 5, 8),), frontend="export", dynamic_axes=axes)


@pytest.mark.slow
def test_transformers_model_over_a_dynamic_sequence_length():
    import transformers as tf  # a dev dependency: missing, the test fails rather than skips
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = tf.LlamaForCausalLM(tf.LlamaConfig(
            vocab_size=99, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=64, use_cache=False)).eval()
    ids = torch.randint(0, 99, (1, 7))
    with warnings.catch_warnings():
        warnings.simplefilter("error", BakedSizeWarning)
        art = t2n.compile(model, (ids,), frontend="export", dynamic_axes={"ids": {1: "S"}}, input_names=["ids"])
    assert [str(d) for d in art.ir.inputs[0].type.shape] == ["1", "S"]
    for S in (3, 12):
        ids = torch.randint(0, 99, (1, S), generator=torch.Generator().manual_seed(S))
        with torch.no_grad():
            logits = model(ids).logits.numpy()
        assert art.check(inputs=[ids.numpy()], expected=[logits]).ok
        assert np.isfinite(logits).all()


def test_size_expressions_map_to_ir_dims_or_a_typed_refusal():
    import sympy
    from torch.utils._sympy.functions import FloorDiv, Max, Mod

    from t2n.errors import ExportFrontendError
    from t2n.frontend.export.symbolic import dim_of

    s = sympy.Symbol("s0", integer=True, positive=True)
    names = {"s0": "S"}
    assert str(dim_of(2 * s + 1, names)) == "2 * S + 1"
    assert str(dim_of(FloorDiv(s - 1, 2) + 1, names)) == "(S - 1) / 2 + 1"
    assert dim_of(Mod(s, 4), names).evaluate({"S": 10}) == 2
    assert str(dim_of(s**2 - 1, names)) == str(dim_of(s * s - 1, names))
    assert dim_of(sympy.Integer(7), names) == 7
    with pytest.raises(ExportFrontendError, match=r"size 0\.5 of type float.*frontend=\"jit\""):
        dim_of(0.5, names)
    with pytest.raises(ExportFrontendError, match=r"Max\(3, s0\) has no form.*frontend=\"jit\""):
        dim_of(Max(s, 3), names)
    with pytest.raises(ExportFrontendError, match="u0 is not an input size"):
        dim_of(sympy.Symbol("u0"), names)


def test_export_to_disk_with_dynamic_shapes(tmp_path):
    model = nn.Linear(4, 4).eval()
    dest = tmp_path / "m.nnef.tgz"
    art = t2n.export(model, (torch.randn(1, 5, 4),), dest, frontend="export",
                     dynamic_shapes=({1: Dim("S", max=100)},))
    assert dest.exists()
    assert "extension tract_assert S <= 100;" in _extensions(art)
    _check_at(art, model, lambda S: (torch.randn(1, S, 4),), [{"S": 9}])


def test_list_form_axes_name_their_symbols_from_input_and_axis():
    model = nn.Linear(8, 4).eval()
    art = t2n.compile(model, (torch.randn(2, 5, 8),), frontend="export", dynamic_axes={"input_0": [0, 1]})
    assert [str(d) for d in art.ir.inputs[0].type.shape] == ["input_0_dim0", "input_0_dim1", "8"]
    _check_at(art, model, lambda input_0_dim0, input_0_dim1: (torch.randn(input_0_dim0, input_0_dim1, 8),),
              [{"input_0_dim0": 3, "input_0_dim1": 4}])


def test_example_outside_the_dims_range_is_refused():
    with pytest.raises(ExportSpecializationError, match=r"5000 not in range.*\n.*outside the range the Dim allows"):
        t2n.compile(nn.Linear(8, 4), (torch.randn(1, 5000, 8),), frontend="export",
                    dynamic_shapes=({1: Dim("S", max=4096)},))
