"""Scaled dot-product attention, nn.MultiheadAttention and the transformer layers, in
their eval fast paths (PyTorch's fused kernels) and slow paths, in tract and Khronos."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from t2n.testing import Call, Lambda, check_dynamic, check_export


def r(*shape):
    return torch.randn(*shape)


sdpa = F.scaled_dot_product_attention


def bool_mask():
    m = torch.rand(3, 5) > 0.4
    m[:, 0] = True
    m[1] = False  # a query that may attend to nothing: PyTorch gives zeros
    return m


def float_mask():
    m = torch.randn(3, 5)
    m[0, 1] = float("-inf")
    m[2] = float("-inf")  # all -inf: zeros again
    return m


BOOL_MASK = bool_mask()
QKV = lambda: (r(1, 2, 3, 4), r(1, 2, 5, 4), r(1, 2, 5, 6))  # noqa: E731

SDPA = {
    "plain": lambda: (Lambda(lambda q, k, v: sdpa(q, k, v)), QKV()),
    "causal_fewer_queries": lambda: (Lambda(lambda q, k, v: sdpa(q, k, v, is_causal=True)), QKV()),
    "causal_more_queries": lambda: (Lambda(lambda q, k, v: sdpa(q, k, v, is_causal=True)),
                                    (r(1, 2, 5, 4), r(1, 2, 3, 4), r(1, 2, 3, 6))),
    "bool_mask_input": lambda: (Lambda(lambda q, k, v, m: sdpa(q, k, v, attn_mask=m)), (*QKV(), bool_mask())),
    "bool_mask_constant": lambda: (Lambda(lambda q, k, v, m=BOOL_MASK: sdpa(q, k, v, attn_mask=m)), QKV()),
    "float_mask_input": lambda: (Lambda(lambda q, k, v, m: sdpa(q, k, v, attn_mask=m)), (*QKV(), float_mask())),
    "float_mask_broadcast_batch": lambda: (Lambda(lambda q, k, v, m: sdpa(q, k, v, attn_mask=m)),
                                           (r(2, 2, 3, 4), r(2, 2, 5, 4), r(2, 2, 5, 6), r(2, 1, 1, 5))),
    "scale_3d": lambda: (Lambda(lambda q, k, v: sdpa(q, k, v, scale=0.3)), (r(2, 3, 4), r(2, 5, 4), r(2, 5, 6))),
    "gqa": lambda: (Lambda(lambda q, k, v: sdpa(q, k, v, enable_gqa=True, is_causal=True)),
                    (r(1, 4, 3, 4), r(1, 2, 3, 4), r(1, 2, 3, 6))),
}


@pytest.mark.parametrize("name", sorted(SDPA))
def test_scaled_dot_product_attention(name):
    model, args = SDPA[name]()
    check_export(model, args)


def test_masked_rows_are_zero_and_khronos_gets_no_inf_literal():
    q, k, v = QKV()
    model = Lambda(lambda q, k, v, m: sdpa(q, k, v, attn_mask=m))
    res = check_export(model, (q, k, v, float_mask()))
    assert torch.all(model(q, k, v, float_mask())[:, :, 2] == 0)  # what the engines matched
    assert "inf" not in res.artifacts["khronos"].rendered.graph_nnef


def test_sdpa_dynamic_sequence():
    check_dynamic(Lambda(lambda q, k, v: sdpa(q, k, v, is_causal=True)),
                  lambda B, S: (r(B, 2, S, 4), r(B, 2, S, 4), r(B, 2, S, 4)),
                  {f"input_{i}": {0: "B", 2: "S"} for i in range(3)},
                  [{"B": 1, "S": 4}, {"B": 2, "S": 1}, {"B": 1, "S": 6}])


def _mha(**kw):
    return nn.MultiheadAttention(8, 2, **kw)


KPM = torch.tensor([[False, False, True], [False, False, False]])
CAUSAL = torch.triu(torch.ones(3, 3, dtype=torch.bool), 1)  # True = masked in nn.MultiheadAttention


def per_head_mask():
    m = torch.rand(4, 3, 3) > 0.5
    m[..., 0] = False  # a fully masked row is NaN in PyTorch's MHA
    return m


# (model, args, an aten op that must have been lowered, rules of other families it goes through)
MHA = {
    "fast_self": lambda: (Call(_mha(batch_first=True), lambda m, x: m(x, x, x)), (r(2, 3, 8),),
                          "aten::_native_multi_head_attention", ()),
    "fast_key_padding_per_head": lambda: (
        Call(_mha(batch_first=True), lambda m, x, k: m(x, x, x, key_padding_mask=k, average_attn_weights=False)),
        (r(2, 3, 8), KPM), "aten::_native_multi_head_attention", ("aten::masked_fill_",)),
    "fast_attn_mask_no_weights": lambda: (
        Call(_mha(batch_first=True), lambda m, x, a: m(x, x, x, attn_mask=a, need_weights=False)[0]),
        (r(2, 3, 8), CAUSAL), "aten::_native_multi_head_attention", ("aten::masked_fill_",)),
    "fast_both_masks": lambda: (
        Call(_mha(batch_first=True), lambda m, x, a, k: m(x, x, x, attn_mask=a, key_padding_mask=k)),
        (r(2, 3, 8), CAUSAL, KPM), "aten::_native_multi_head_attention", ("aten::masked_fill_",)),
    "slow_seq_first_cross": lambda: (Call(_mha(), lambda m, q, k: m(q, k, k)), (r(3, 2, 8), r(4, 2, 8)),
                                     "aten::softmax", ()),
    "slow_seq_first_no_weights": lambda: (Call(_mha(), lambda m, q, k: m(q, k, k, need_weights=False)[0]),
                                          (r(3, 2, 8), r(4, 2, 8)), "aten::scaled_dot_product_attention", ()),
    "slow_kdim_vdim": lambda: (Call(_mha(batch_first=True, kdim=5, vdim=6), lambda m, q, k, v: m(q, k, v)),
                               (r(2, 3, 8), r(2, 4, 5), r(2, 4, 6)), "aten::softmax", ()),
    "slow_bias_kv_zero_attn": lambda: (
        Call(_mha(batch_first=True, add_bias_kv=True, add_zero_attn=True), lambda m, x: m(x, x, x)),
        (r(2, 3, 8),), "aten::softmax", ()),
    "slow_3d_bool_mask_cross": lambda: (
        Call(_mha(batch_first=True), lambda m, q, k, a: m(q, k, k, attn_mask=a, average_attn_weights=False)),
        (r(2, 3, 8), r(2, 3, 8), per_head_mask()), "aten::softmax", ("aten::masked_fill_",)),
    "slow_float_masks": lambda: (
        Call(_mha(batch_first=True), lambda m, x, a, k: m(x, x, x, attn_mask=a, key_padding_mask=k)),
        (r(2, 3, 8), r(3, 3), KPM.float() * -1e4), "aten::softmax", ()),
}


@pytest.mark.parametrize("name", sorted(MHA))
def test_multihead_attention(name):
    model, args, aten, _rules = MHA[name]()
    res = check_export(model, args)
    assert any(op.loc.aten == aten for op in res.artifacts["tract"].ir.ops()), f"{aten} was not traced"


SQUARE = nn.Transformer.generate_square_subsequent_mask(3)
SQUARE_4 = nn.Transformer.generate_square_subsequent_mask(4)


def _layer(**kw):
    return nn.TransformerEncoderLayer(8, 2, 16, **kw)


ENCODERS = {
    "layer_fast_relu": lambda: (_layer(batch_first=True), (r(2, 3, 8),), "aten::_transformer_encoder_layer_fwd", ()),
    "layer_fast_gelu_norm_first": lambda: (_layer(batch_first=True, activation="gelu", norm_first=True),
                                           (r(2, 3, 8),), "aten::_transformer_encoder_layer_fwd", ()),
    "layer_fast_key_padding": lambda: (Call(_layer(batch_first=True), lambda m, x, k: m(x, src_key_padding_mask=k)),
                                       (r(2, 3, 8), KPM), "aten::_transformer_encoder_layer_fwd",
                                       ("aten::masked_fill_",)),
    # the fused kernel masks every non-zero position of a float mask (here 0 / -inf)
    "layer_fast_float_causal_mask": lambda: (
        Call(_layer(batch_first=True), lambda m, x, a=SQUARE: m(x, src_mask=a, is_causal=True)),
        (r(2, 3, 8),), "aten::_transformer_encoder_layer_fwd", ()),
    "layer_slow_seq_first": lambda: (_layer(), (r(3, 2, 8),), "aten::layer_norm", ()),
    # the stack's nested-tensor fast path: padded positions come out as zeros
    "stack_nested_tensor": lambda: (
        Call(nn.TransformerEncoder(_layer(batch_first=True), 2, norm=nn.LayerNorm(8)),
             lambda m, x, k: m(x, src_key_padding_mask=k)),
        (r(2, 3, 8), KPM), "aten::to_padded_tensor", ("aten::masked_fill_", "aten::logical_not")),
    "stack_no_mask": lambda: (nn.TransformerEncoder(_layer(batch_first=True), 2), (r(2, 3, 8),),
                              "aten::_transformer_encoder_layer_fwd", ()),
    "stack_seq_first_norm_first_key_padding": lambda: (
        Call(nn.TransformerEncoder(_layer(norm_first=True), 2, enable_nested_tensor=False),
             lambda m, x, k: m(x, src_key_padding_mask=k)),
        (r(3, 2, 8), KPM), "aten::layer_norm", ("aten::masked_fill_",)),
    "decoder_layer_seq_first": lambda: (Call(nn.TransformerDecoderLayer(8, 2, 16), lambda m, t, s: m(t, s)),
                                        (r(3, 2, 8), r(4, 2, 8)), "aten::scaled_dot_product_attention", ()),
    "decoder_layer_causal_gelu_norm_first": lambda: (
        Call(nn.TransformerDecoderLayer(8, 2, 16, batch_first=True, norm_first=True, activation="gelu"),
             lambda m, t, s: m(t, s, tgt_mask=nn.Transformer.generate_square_subsequent_mask(3), tgt_is_causal=True)),
        (r(2, 3, 8), r(2, 4, 8)), "aten::scaled_dot_product_attention", ()),
    "transformer": lambda: (
        Call(nn.Transformer(8, 2, 2, 2, 16, batch_first=True),
             lambda m, s, t, k, a=SQUARE_4: m(s, t, tgt_mask=a, src_key_padding_mask=k, memory_key_padding_mask=k)),
        (r(2, 3, 8), r(2, 4, 8), KPM), "aten::scaled_dot_product_attention", ("aten::masked_fill_",)),
}


@pytest.mark.parametrize("name", sorted(ENCODERS))
def test_transformer_layers(name):
    model, args, aten, _rules = ENCODERS[name]()
    res = check_export(model, args)
    assert any(op.loc.aten == aten for op in res.artifacts["tract"].ir.ops()), f"{aten} was not traced"


def test_fused_kernels_follow_dynamic_axes():
    check_dynamic(_layer(batch_first=True), lambda B, S: (r(B, S, 8),), {"input_0": {0: "B", 1: "S"}},
                  [{"B": 2, "S": 3}, {"B": 1, "S": 5}])
    check_dynamic(Call(_mha(batch_first=True), lambda m, x: m(x, x, x)), lambda B, S: (r(B, S, 8),),
                  {"input_0": {0: "B", 1: "S"}}, [{"B": 2, "S": 3}, {"B": 1, "S": 1}])
