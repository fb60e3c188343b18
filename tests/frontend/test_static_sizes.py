"""Without dynamic axes, sizes read in ``forward`` are lowered as Python numbers: the
lowering builds far fewer shape computations for constant folding to remove, and the
folded graph is the one the symbolic lowering gives."""

import collections

import torch
from torch import nn

import t2n
from t2n.frontend.io import input_names_from_paths, output_names_from_paths
from t2n.frontend.lower import lower
from t2n.frontend.registry import LoweringRegistry
from t2n.frontend.trace import trace_module
from t2n.options import compile_options


class SizeArithmetic(nn.Module):
    """Heads split from sizes read at run time, as attention code does."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(16, 16)

    def forward(self, x):
        b, s, d = x.shape
        h = self.proj(x).view(b, s, 4, d // 4).transpose(1, 2)
        scores = h @ h.transpose(-1, -2) / (d // 4) ** 0.5
        out = torch.softmax(scores, -1) @ h
        return out.transpose(1, 2).reshape(b, s, d) + torch.arange(s).view(1, s, 1) * (s - 1)


def _llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return LlamaForCausalLM(cfg).eval(), (torch.randint(0, 100, (1, 7)),)


def _lowered(model, args, static):
    traced = trace_module(model, args, {})
    ins = input_names_from_paths(traced.input_paths)
    outs = output_names_from_paths(traced.output_paths)
    return lower(traced, LoweringRegistry.default(), ins, outs, static_sizes=static)


def _shape_ops(graph):
    return sum(op.kind == "shape_of" for op in graph.ops())


def test_static_lowering_builds_fewer_ops_and_folds_to_the_same_graph():
    torch.manual_seed(0)
    for model, args in [(SizeArithmetic().eval(), (torch.randn(2, 5, 16),)), _llama()]:
        static, symbolic = _lowered(model, args, True), _lowered(model, args, False)
        assert _shape_ops(static) < _shape_ops(symbolic)
        assert len(static) < 0.8 * len(symbolic)
        folded = [compile_options().pipeline(g).graph for g in (static, symbolic)]
        kinds = [collections.Counter(op.kind for op in g.ops()) for g in folded]
        assert kinds[0] == kinds[1]


def test_sizes_as_numbers_match_pytorch_in_tract():
    torch.manual_seed(0)
    art = t2n.compile(SizeArithmetic().eval(), (torch.randn(2, 5, 16),))
    art.check()
    art = t2n.compile(*_llama())
    art.check()
