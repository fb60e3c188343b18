"""Mixture-of-experts blocks: the experts extracted as ``moe_experts``, the router found
by pattern and fused into tract's ``tract_moe_ffn`` for each form of weights it
computes, every other router kept with the experts in standard operations (tract,
older tract, Khronos NNEF). Every artifact runs in its engine against PyTorch."""

from __future__ import annotations

import copy
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import t2n
from t2n.errors import CheckMismatchError, NotExpressibleError
from t2n.frontend.transformers_experts import experts_form, moe_extractors
from t2n.ir import DType

E, D, H, K = 4, 64, 32, 2


class Experts(nn.Module):
    """transformers' experts interface (fused gate/up, optional biases), computed token
    by token in Python: untraceable, as the real ones are."""

    def __init__(self, transposed: bool = False, interleaved: bool = False, bias: bool = False,
                 act: nn.Module | None = None) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(1)
        up_shape, down_shape = ((E, D, 2 * H), (E, H, D)) if transposed else ((E, 2 * H, D), (E, D, H))
        self.gate_up_proj = nn.Parameter(torch.randn(up_shape, generator=g) * 0.2)
        self.down_proj = nn.Parameter(torch.randn(down_shape, generator=g) * 0.2)
        self.has_bias = bias
        if bias:
            self.gate_up_proj_bias = nn.Parameter(torch.randn(E, 2 * H, generator=g) * 0.1)
            self.down_proj_bias = nn.Parameter(torch.randn(E, D, generator=g) * 0.1)
        self.is_transposed, self.has_gate, self.interleaved = transposed, True, interleaved
        self.act_fn = act if act is not None else nn.SiLU()

    def _apply_gate(self, z: torch.Tensor) -> torch.Tensor:
        gate, up = (z[..., ::2], z[..., 1::2]) if self.interleaved else z.chunk(2, dim=-1)
        return self.act_fn(gate) * up

    def forward(self, x: torch.Tensor, index: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        out = torch.zeros_like(x)
        for t in range(x.shape[0]):
            for e, w in zip(index[t].tolist(), weights[t]):
                wu, wd = self.gate_up_proj[e], self.down_proj[e]
                z = x[t] @ wu if self.is_transposed else wu @ x[t]
                if self.has_bias:
                    z = z + self.gate_up_proj_bias[e]
                y = self._apply_gate(z[None])[0]
                y = y @ wd if self.is_transposed else wd @ y
                if self.has_bias:
                    y = y + self.down_proj_bias[e]
                out[t] += w * y
        return out


class Block(nn.Module):
    """A router of the given kind in front of the experts."""

    def __init__(self, router: str, bias: bool = False, **experts: object) -> None:
        super().__init__()
        torch.manual_seed(2)
        self.router, self.gate = router, nn.Linear(D, E, bias=bias)
        self.experts = Experts(**experts)  # type: ignore[arg-type]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.gate(x)
        if self.router == "normalized":  # Mixtral, Qwen with norm_topk_prob
            v, i = torch.topk(F.softmax(logits.float(), dim=-1), K, dim=-1)
            w = v / v.sum(dim=-1, keepdim=True)
        elif self.router == "softmax_of_top":  # gpt-oss, Granite
            v, i = torch.topk(logits, K, dim=-1)
            w = F.softmax(v, dim=-1)
        elif self.router == "softmax_all":  # OLMoE
            v, i = torch.topk(F.softmax(logits, dim=-1), K, dim=-1)
            w = v
        elif self.router == "sigmoid":
            v, i = torch.topk(torch.sigmoid(logits), K, dim=-1)
            w = v
        elif self.router == "raw":
            v, i = torch.topk(logits, K, dim=-1)
            w = v
        else:  # scaled: no form of tract's operator
            v, i = torch.topk(F.softmax(logits, dim=-1), K, dim=-1)
            w = v * 2.5
        return self.experts(x, i, w)


def _compile(block: nn.Module, target: t2n.Target) -> t2n.Artifact:
    """The target's own passes write the extracted experts: tract's operator from 0.23.9
    where the router allows, standard operations elsewhere."""
    x = torch.randn(5, D, generator=torch.Generator().manual_seed(3))
    return t2n.compile(block.eval(), (x,), target, extractors=moe_extractors(block))


@pytest.mark.parametrize("router, gate", [("normalized", "softmax_topk"), ("softmax_of_top", "softmax_topk"),
                                          ("softmax_all", "softmax_all"), ("sigmoid", "sigmoid"), ("raw", "raw")])
def test_router_forms_become_tract_moe_ffn(router: str, gate: str) -> None:
    artifact = _compile(Block(router), t2n.TractNNEF())
    assert re.search(rf'tract_moe_ffn\(.*gate = "{gate}".*expert_layout = "canonical"', artifact.graph_nnef)
    assert " topk(" not in artifact.graph_nnef and "tract_core_topk" not in artifact.graph_nnef
    assert artifact.stats["pass_stats"]["fuse-moe-router.moe blocks fused"] == 1
    assert artifact.check().ok


def test_biases_transposed_interleaved_experts() -> None:
    """gpt-oss's layout: router bias, experts stored [in, out] with gate/up interleaved,
    then expert biases too."""
    block = Block("softmax_of_top", bias=True, transposed=True, interleaved=True)
    artifact = _compile(block, t2n.TractNNEF())
    assert "wg_bias = " in artifact.graph_nnef and 'expert_layout = "canonical"' in artifact.graph_nnef
    assert artifact.check().ok
    with_bias = Block("softmax_of_top", bias=True, transposed=True, interleaved=True)
    with_bias.experts = Experts(transposed=True, interleaved=True, bias=True)
    artifact = _compile(with_bias, t2n.TractNNEF())
    assert all(f"{b} = " in artifact.graph_nnef for b in ("w1_bias", "w3_bias", "w2_bias"))
    assert artifact.check().ok


def test_other_router_keeps_its_form_and_experts_run_in_standard_operations() -> None:
    artifact = _compile(Block("scaled"), t2n.TractNNEF())
    assert "tract_moe_ffn" not in artifact.graph_nnef
    assert artifact.stats["pass_stats"]["expand-moe-experts.moe experts expanded"] == 1
    assert artifact.check().ok


def test_standard_form_for_older_tract() -> None:
    artifact = _compile(Block("normalized"), t2n.TractNNEF("0.23.5"))
    assert "tract_moe_ffn" not in artifact.graph_nnef
    assert artifact.check().ok


def test_khronos_refuses_only_the_router() -> None:
    """The experts have a standard form; choosing the top k has none in Khronos NNEF."""
    with pytest.raises(NotExpressibleError) as info:
        _compile(Block("normalized"), t2n.KhronosNNEF())
    assert [p.op for p in info.value.problems] == ["aten::topk"]


def test_erf_gelu_experts_stay_in_standard_operations() -> None:
    """tract's operator has only the tanh GELU: exact GELU experts are not fused."""
    block = Block("normalized", act=nn.GELU())
    assert experts_form(block.experts).activation == "gelu"  # type: ignore[union-attr]
    artifact = _compile(block, t2n.TractNNEF())
    assert "tract_moe_ffn" not in artifact.graph_nnef
    assert artifact.check().ok


def test_unknown_gate_is_not_extracted() -> None:
    block = Block("normalized")
    block.experts._apply_gate = lambda z: torch.tanh(z[..., :H]) * z[..., H:]  # type: ignore[method-assign]
    assert experts_form(block.experts) is None and moe_extractors(block) == []


class Routed(nn.Module):
    """The experts alone, their routing given as inputs."""

    def __init__(self) -> None:
        super().__init__()
        self.experts = Experts(bias=True)

    def forward(self, x: torch.Tensor, index: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        return self.experts(x, index, weights)


def test_experts_standard_form_runs_in_khronos_nnef() -> None:
    g = torch.Generator().manual_seed(4)
    x, weights = torch.randn(5, D, generator=g), torch.rand(5, K, generator=g)
    index = torch.stack([torch.randperm(E, generator=g)[:K] for _ in range(5)])
    module = Routed().eval()
    artifact = t2n.compile(module, (x, index, weights), t2n.KhronosNNEF(), extractors=moe_extractors(module))
    assert artifact.check().ok


@pytest.mark.parametrize("router, gate", [("normalized", "softmax_topk"), ("softmax_of_top", "softmax_topk"),
                                          ("softmax_all", "softmax_all"), ("sigmoid", "sigmoid"), ("raw", "raw")])
def test_numpy_evaluators_compute_what_pytorch_computes(router: str, gate: str) -> None:
    """The IR ops' evaluators (the oracle of constant folding and of IR-level tests)."""
    from t2n.backends.tract.ops import with_tract_forms
    from t2n.ir import OpSet

    ops = with_tract_forms(OpSet.default())
    block = Block(router, bias=router == "softmax_of_top", transposed=True, interleaved=True).eval()
    block.experts = Experts(transposed=False, bias=True)
    e = block.experts
    x = torch.randn(5, D, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        expected = block(x).numpy()
        logits = block.gate(x)
    w = [t.detach().numpy() for t in (e.gate_up_proj[:, :H], e.down_proj, e.gate_up_proj[:, H:],
                                      e.gate_up_proj_bias[:, :H], e.gate_up_proj_bias[:, H:], e.down_proj_bias)]
    router_bias = [block.gate.bias.detach().numpy()] if block.gate.bias is not None else []
    attrs = {"k": K, "activation": "silu", "gate": gate, "expert_layout": "linear", "has_w3": True,
             "has_wg_bias": bool(router_bias), "has_w1_bias": True, "has_w3_bias": True, "has_w2_bias": True}
    (got,) = ops.get("tract_moe_ffn").evaluate([x.numpy(), block.gate.weight.detach().numpy(), w[0], w[1], w[2],  # type: ignore[misc]
                                          *router_bias, *w[3:]], attrs)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    if router == "raw":  # the experts alone, given the router's choice
        weights, index = torch.topk(logits, K)
        (got,) = ops.get("moe_experts").evaluate(  # type: ignore[misc]
            [x.numpy(), index.numpy(), weights.numpy(), w[0], w[1], w[2], *w[3:]],
            {"layout": "linear", "activation": "silu", "has_up": True, "has_gate_bias": True, "has_up_bias": True,
             "has_down_bias": True})
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


# --- f32 forcing reaches the experts in standard operations ---------------------------------
# The experts are lowered before the f32-forcing passes (Target.lowering_passes), so forced
# linear accumulation computes their products and biases in f32.

OFFSET = 256.0
"""A large input feature the experts' gate/up bias cancels (the "massive activation" of
LLMs): rounding the product to f16 before the bias loses what is left after it."""


def _cancelling_block() -> tuple[nn.Module, nn.Module, torch.Tensor]:
    """The f16 block, the same weights in f32, and an f16 input."""
    block = Block("normalized")
    block.experts = Experts(bias=True)
    with torch.no_grad():
        block.gate.weight[:, 0] = 0  # the router ignores the offset feature
        block.experts.gate_up_proj_bias.copy_(-OFFSET * block.experts.gate_up_proj[:, :, 0])
    b16 = copy.deepcopy(block).half().eval()
    x = torch.randn(8, D, generator=torch.Generator().manual_seed(3))
    x[:, 0] = OFFSET
    return b16, copy.deepcopy(b16).float().eval(), x.half()


def _error_to_f32(art: t2n.Artifact, expected: np.ndarray) -> float:
    try:
        return art.check("very_loose", inputs=art.example_inputs, expected=[expected]).max_abs
    except CheckMismatchError as exc:
        return exc.report.max_abs


def _compile_f16(b16: nn.Module, x: torch.Tensor, target: t2n.Target, passes: str = "default") -> t2n.Artifact:
    return t2n.compile(b16, (x,), target, extractors=moe_extractors(b16), verify_ir=True, passes=passes)


@pytest.mark.parametrize("how", ["option", "spec"])
def test_forced_linear_accumulation_reaches_expanded_experts(how: str) -> None:
    b16, b32, x = _cancelling_block()
    with torch.no_grad():
        ref32 = b32(x.float()).numpy()
    if how == "option":
        forced = _compile_f16(b16, x, t2n.TractNNEF("0.23.0", force_linear_accumulation_in_f32=True))
    else:  # a spec that places the pass itself: the experts are lowered before it still
        forced = _compile_f16(b16, x, t2n.TractNNEF("0.23.0"), "default,+force-linear-accumulation-in-f32")
    plain = _compile_f16(b16, x, t2n.TractNNEF("0.23.0"))
    stats = forced.stats["pass_stats"]
    assert stats["expand-moe-experts.moe experts expanded"] == 1
    # the router's linear and the experts' gate, up and down products (with their biases)
    assert stats["force-linear-accumulation-in-f32.regions"] == 4
    products = [op for op in forced.ir.ops() if op.kind == "matmul"]
    assert len(products) == 4 and {op.output.type.dtype for op in products} == {DType.F32}
    assert forced.ir.outputs[0].type.dtype is DType.F16
    on32, off32 = _error_to_f32(forced, ref32), _error_to_f32(plain, ref32)
    assert on32 < 0.01 < off32  # f16 rounds the product before the bias cancels it


def test_fused_experts_are_left_to_tract() -> None:
    """From 0.23.9 the block is ``tract_moe_ffn`` (tract computes it in f32 itself): the
    forcing finds no product left to rewrite."""
    b16, b32, x = _cancelling_block()
    art = _compile_f16(b16, x, t2n.TractNNEF(force_linear_accumulation_in_f32=True))
    assert art.stats["pass_stats"]["fuse-moe-router.moe blocks fused"] == 1
    assert art.stats["pass_stats"]["force-linear-accumulation-in-f32.regions"] == 0
    with torch.no_grad():
        assert _error_to_f32(art, b32(x.float()).numpy()) < 0.01
