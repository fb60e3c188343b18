"""``histc`` and ``_grouped_mm``: transformers' mixture-of-experts layers on CPU
(``grouped_mm_experts_forward``) count tokens per expert with ``histc`` and run the
experts with one grouped product; torch.export traces the product to transformers'
``grouped_mm_fallback`` custom op instead. Both frontends, checked in tract. With the
jit frontend, ``t2n.compile`` extracts transformers' experts modules by itself (one
``moe_experts`` op, tract's ``tract_moe_ffn``), which also follows a dynamic token axis;
with the export frontend the sort of the tokens by expert does, written with comparisons."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import t2n
from t2n.errors import UnsupportedOpsError
from t2n.testing import check_export

FRONTENDS = ("jit", "export")


class Histc(nn.Module):
    def __init__(self, bins: int, lo: float, hi: float, cast: bool = False) -> None:
        super().__init__()
        self.bins, self.lo, self.hi, self.cast = bins, lo, hi, cast

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.cast:
            x = x.float()
        return torch.histc(x, bins=self.bins, min=self.lo, max=self.hi)


def _around(edges: torch.Tensor) -> torch.Tensor:
    """Each edge and its float neighbours on both sides."""
    up = torch.nextafter(edges, torch.tensor(math.inf))
    down = torch.nextafter(edges, torch.tensor(-math.inf))
    return torch.cat([edges, up, down])


HISTC_CASES = [
    # transformers' form: expert ids (ints cast to float), bins = E, range [0, E - 1]
    (Histc(4, 0, 3, cast=True), torch.tensor([0, 0, 1, 3, 3, 3, 5, -1, 2])),
    # every edge of a range and its neighbours, values out of range, NaN and infinities
    (Histc(5, -1.0, 1.5), torch.cat([_around(torch.linspace(-1.0, 1.5, 6)),
                                     torch.tensor([math.nan, math.inf, -math.inf, 7.0, -3.0, 0.3])])),
    # edges the linear interpolation puts in another bin than a comparison would
    (Histc(7, 0.1, 0.8), _around(torch.linspace(0.1, 0.8, 8))),
    (Histc(3, -2.0, 2.0), torch.randn(4, 6) * 2),
    (Histc(6, 0.0, 1.0), torch.rand(2, 3, 5, dtype=torch.float64)),
]


@pytest.mark.parametrize("frontend", FRONTENDS)
def test_histc(frontend: str) -> None:
    for model, x in HISTC_CASES:
        check_export(model, (x,), targets=("tract",), tolerance="exact", frontend=frontend)


def test_histc_of_the_data_range_is_refused_by_name() -> None:
    with pytest.raises(UnsupportedOpsError, match="min == max"):
        t2n.compile(Histc(4, 0, 0), (torch.randn(5),), frontend="jit")


class GroupedMM(nn.Module):
    def __init__(self, experts: int, k: int, n: int, transposed: bool = False) -> None:
        super().__init__()
        self.transposed = transposed
        shape = (experts, n, k) if transposed else (experts, k, n)
        self.weight = nn.Parameter(torch.randn(shape))

    def forward(self, x: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
        w = self.weight.transpose(-2, -1) if self.transposed else self.weight
        return nn.functional.grouped_mm(x, w, offs=offs) * 2


# offs[-1] == S: PyTorch leaves the rows past the last offset undefined
GROUPED_CASES = [
    (GroupedMM(4, 8, 12), [2, 2, 5, 7]),  # uneven groups, group 1 empty
    (GroupedMM(3, 4, 8, transposed=True), [0, 6, 9]),  # an empty first group, weights stored [E, N, K]
    (GroupedMM(2, 8, 4), [0, 5]),
]


def _rows(model: GroupedMM, offs: list[int], dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    k = model.weight.shape[-1] if model.transposed else model.weight.shape[1]
    return torch.randn(offs[-1], k, dtype=dtype), torch.tensor(offs, dtype=torch.int32)


def test_grouped_mm() -> None:
    """float32 (torch.export cannot trace a float32 ``_grouped_mm``: its meta kernel takes
    bfloat16 only, which is why transformers calls its fallback op under torch.export)."""
    for model, offs in GROUPED_CASES:
        check_export(model, _rows(model, offs), targets=("tract",), frontend="jit")


@pytest.mark.parametrize("frontend", FRONTENDS)
def test_grouped_mm_of_bfloat16(frontend: str) -> None:
    """Sizes a multiple of 8 (PyTorch wants 16-byte strides); tract computes in float16."""
    model = GroupedMM(4, 8, 16).to(torch.bfloat16)
    check_export(model, _rows(model, [2, 2, 5, 7], torch.bfloat16), targets=("tract",), tolerance="loose",
                 frontend=frontend)


class TransformersFallback(nn.Module):
    """transformers' own grouped product (what torch.export records for its MoE layers):
    zeros past the last offset."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(4, 8, 12))

    def forward(self, x: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
        return torch.ops.transformers.grouped_mm_fallback(x, self.weight, offs=offs)


@pytest.mark.parametrize("frontend", FRONTENDS)
def test_transformers_grouped_mm_fallback(frontend: str) -> None:
    import transformers.integrations.moe  # noqa: F401  (registers the op; transformers is a dev dependency)
    offs = torch.tensor([2, 2, 5, 7], dtype=torch.int32)
    check_export(TransformersFallback(), (torch.randn(9, 8), offs), targets=("tract",), frontend=frontend)


def test_grouped_mm_over_a_dynamic_number_of_rows() -> None:
    model = GroupedMM(3, 4, 8).eval()
    offs = torch.tensor([2, 3, 6], dtype=torch.int32)
    art = t2n.compile(model, (torch.randn(6, 4), offs), dynamic_axes={"input_0": {0: "S"}}, frontend="jit")
    art.check()
    x, offs = torch.randn(9, 4), torch.tensor([4, 4, 9], dtype=torch.int32)
    with torch.no_grad():
        expected = model(x, offs)
    art.check(inputs=[x.numpy(), offs.numpy()], expected=[expected.numpy()])


class BatchedGroupedMM(nn.Module):
    def forward(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return nn.functional.grouped_mm(x, w)


def test_grouped_mm_of_other_ranks_is_refused_by_name() -> None:
    with pytest.raises(UnsupportedOpsError, match="3-D input by a 3-D weight without offsets"):
        t2n.compile(BatchedGroupedMM(), (torch.randn(2, 4, 8), torch.randn(2, 8, 4)), frontend="jit")


def _mixtral() -> nn.Module:
    from transformers import MixtralConfig, MixtralModel

    return MixtralModel(MixtralConfig(
        vocab_size=99, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2))


def _qwen2_moe() -> nn.Module:
    from transformers import Qwen2MoeConfig, Qwen2MoeModel

    return Qwen2MoeModel(Qwen2MoeConfig(
        vocab_size=99, hidden_size=32, intermediate_size=64, moe_intermediate_size=16,
        shared_expert_intermediate_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        num_experts=4, num_experts_per_tok=2))


@pytest.mark.slow
@pytest.mark.parametrize("frontend", FRONTENDS)
@pytest.mark.parametrize("build", [_mixtral, _qwen2_moe], ids=["mixtral", "qwen2_moe"])
def test_moe_models(build, frontend: str) -> None:
    torch.manual_seed(0)
    model = build().eval()
    ids = torch.randint(0, 99, (2, 7))
    mask = torch.ones(2, 7, dtype=torch.long)
    mask[1, :2] = 0
    art = t2n.compile(model, (ids,), kwargs=dict(attention_mask=mask), frontend=frontend)
    art.check()


def test_transformers_experts_are_extracted_by_default_and_follow_a_dynamic_sequence() -> None:
    """Sorting the tokens by expert (transformers' grouped forward) cannot run on a dynamic
    axis in tract; the extracted experts can, and run as tract's fused operator."""
    from transformers import MixtralConfig, MixtralModel

    torch.manual_seed(0)
    model = MixtralModel(MixtralConfig(
        vocab_size=99, hidden_size=32, intermediate_size=48, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2)).eval()
    art = t2n.compile(model, (torch.randint(0, 99, (1, 9)),), kwargs=dict(use_cache=False),
                      dynamic_axes={"input_0": {1: "S"}})
    assert "tract_moe_ffn(" in art.graph_nnef and "tract_core_topk" not in art.graph_nnef  # router fused, no sort
    ids = torch.randint(0, 99, (1, 23))
    with torch.no_grad():
        expected = model(ids, use_cache=False).last_hidden_state
    assert art.check(inputs=[ids], expected=[expected]).ok


def test_a_users_extractor_of_the_experts_class_is_the_one_used() -> None:
    from transformers import MixtralConfig, MixtralModel

    from t2n.frontend.transformers_experts import library_extractors, moe_extractors

    model = MixtralModel(MixtralConfig(
        vocab_size=99, hidden_size=32, intermediate_size=48, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2)).eval()
    own = moe_extractors(model)
    assert [e.module_type.__name__ for e in library_extractors(model, [])] == ["MixtralExperts"]
    assert library_extractors(model, own) == []



@pytest.mark.slow
def test_the_export_frontends_grouped_experts_follow_a_dynamic_sequence() -> None:
    """torch.export has no extractors: the experts' grouped products are traced, with the
    sort of the tokens by expert, which the tract target writes with comparisons on a
    dynamic axis (backends/tract/passes/dynamic_sort.py)."""
    torch.manual_seed(0)
    model = _mixtral().eval()
    art = t2n.compile(model, (torch.randint(0, 99, (1, 9)),), kwargs=dict(use_cache=False),
                      dynamic_axes={"input_0": {1: "S"}}, frontend="export")
    for length in (4, 21):
        ids = torch.randint(0, 99, (1, length))
        with torch.no_grad():
            expected = model(ids, use_cache=False).last_hidden_state
        assert art.check(inputs=[ids], expected=[expected]).ok
