"""Nested inputs/outputs, names, constants among the arguments, shared weights."""

import collections

import numpy as np
import torch

import t2n


class Nested(torch.nn.Module):
    def forward(self, pair, cfg, scale=2.0, *, extra=None):
        a, b = pair
        out = {"sum": a + b * scale, "parts": (a * cfg["k"], [b - 1.0])}
        if extra is not None:
            out["extra"] = extra.mean(dim=-1)
        return out


def test_nested_structures_flatten_in_documented_order():
    a, b, e = torch.rand(2, 3), torch.rand(2, 3), torch.rand(2, 5)
    art = t2n.compile(Nested(), ((a, b), {"k": 3.0}), kwargs={"extra": e})
    assert art.input_names == ["input_0_0", "input_0_1", "extra"]
    # the output "extra" cannot share the input's name in graph.nnef: it is "extra_1" there
    assert art.output_names == ["sum", "parts_0", "parts_1_0", "extra_1"]
    assert art.check().ok
    np.testing.assert_allclose(art.reference_outputs[1], (a * 3.0).numpy())


Out = collections.namedtuple("Out", "logits hidden")


class Tupled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = self.lin(x)
        return Out(h.relu(), h)


def test_namedtuple_and_user_names():
    art = t2n.compile(Tupled(), (torch.rand(3, 4),), input_names=["x"], output_names=["a", "b"])
    assert art.check().ok
    assert "graph main(x) -> (a, b)" in art.graph_nnef


class Shared(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.again = self.lin

    def forward(self, x):
        return self.again(self.lin(x))


def test_shared_weights_are_written_once():
    art = t2n.compile(Shared(), (torch.rand(2, 4),))
    assert sorted(art.tensor_files) == ["lin.bias.dat", "lin.weight.dat"]
    assert art.check().ok


class PassThrough(torch.nn.Module):
    def forward(self, x, y):
        return x, y * 2, x


def test_inputs_returned_as_outputs_get_their_own_names():
    art = t2n.compile(PassThrough(), (torch.rand(2), torch.rand(2)))
    assert art.output_names == ["output_0", "output_1", "output_2"]
    assert art.check().ok


def test_transformers_model_output():
    import transformers
    out_cls = transformers.modeling_outputs.BaseModelOutput

    class M(torch.nn.Module):
        def forward(self, x):
            return out_cls(last_hidden_state=x * 2, hidden_states=(x, x + 1))

    art = t2n.compile(M(), (torch.rand(2, 2),))
    assert art.output_names == ["last_hidden_state", "hidden_states_0", "hidden_states_1"]
    assert art.check().ok


def test_integer_and_bool_inputs_use_typed_externals():
    class M(torch.nn.Module):
        def forward(self, ids, mask, h):
            return ids * 2, mask, h.half() * 2

    art = t2n.compile(M(), (torch.arange(4, dtype=torch.int32), torch.tensor([True, False]),
                            torch.rand(3)))
    assert 'tract_core_external(shape = [4], datum_type = "i32")' in art.graph_nnef
    assert "external<logical>(shape = [2])" in art.graph_nnef
    assert art.check().ok


class _OldStyleGelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))

    @staticmethod
    def backward(ctx, g):  # pragma: no cover - never called at inference
        raise NotImplementedError


class _NewStyleScale(torch.autograd.Function):
    @staticmethod
    def forward(x, s):
        return x * s

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, g):  # pragma: no cover
        raise NotImplementedError


def test_custom_autograd_functions_are_traced_through_their_forward():
    class M(torch.nn.Module):
        def forward(self, x):
            return _NewStyleScale.apply(_OldStyleGelu.apply(x), 3.0)

    from t2n.testing import check_export

    original = torch.autograd.Function.__dict__["apply"]
    res = check_export(M().eval(), (torch.randn(2, 5),))
    assert "tanh" in [op.kind for op in res.artifacts["tract"].ir.ops()]
    assert torch.autograd.Function.__dict__["apply"] is original  # restored after tracing
