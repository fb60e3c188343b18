"""Forms chosen by the artifact-speed grid (docs/architecture.md, "Forms chosen by
measurement"): each is pinned in graph.nnef and runs with PyTorch's numbers in tract."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import t2n


class Norm(nn.Module):
    def __init__(self, norm: nn.Module) -> None:
        super().__init__()
        self.norm = norm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def test_norms_over_batch_statistics_are_tracts_rms_norm():
    """Group and instance norms: ``rms_norm`` of the centred values over one merged axis,
    which tract runs as one ``tract_core_rms_norm``; one channel keeps the decomposed form."""
    torch.manual_seed(0)
    for norm in (nn.GroupNorm(2, 8), nn.InstanceNorm2d(8, affine=True)):
        artifact = t2n.compile(Norm(norm).eval(), (torch.randn(2, 8, 6, 5),), t2n.TractNNEF.latest())
        assert artifact.graph_nnef.count("tract_core_rms_norm(") == 1, type(norm).__name__
        assert artifact.check().ok
    one_channel = t2n.compile(Norm(nn.InstanceNorm2d(1)).eval(), (torch.randn(4, 1, 8, 8),), t2n.TractNNEF.latest())
    assert "tract_core_rms_norm(" not in one_channel.graph_nnef  # faster decomposed there
    assert one_channel.check().ok


def test_an_adaptive_pool_with_even_windows_is_one_pool():
    """Even windows: one pooling op, an axis pooled to one cell one reduction before it;
    no slice per window."""

    class Pool(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.adaptive_avg_pool2d(x, (3, 2)) + F.adaptive_max_pool2d(x, (3, 1))

    artifact = t2n.compile(Pool().eval(), (torch.randn(2, 4, 6, 4),), t2n.TractNNEF.latest())
    text = artifact.graph_nnef
    assert text.count("avg_pool(") == text.count("max_pool(") == text.count("max_reduce(") == 1
    assert "slice(" not in text
    assert artifact.check().ok


def test_uneven_windows_of_one_size_and_stride_are_one_pool():
    """8 -> 7 cells: windows of 2 at stride 1; 9 -> 4: 3 at stride 2. An axis whose
    windows differ in size (10 -> 4, 32 -> 7) is one gather and one max pool for maxima,
    one matrix product for averages: no slice per window."""

    class Pool(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.adaptive_max_pool2d(x, (7, 4)), F.adaptive_avg_pool2d(x, (7, 4))

    artifact = t2n.compile(Pool().eval(), (torch.randn(2, 3, 8, 9),), t2n.TractNNEF.latest())
    text = artifact.graph_nnef
    assert text.count("max_pool(") == text.count("avg_pool(") == 1 and "slice(" not in text
    assert artifact.check().ok
    for shape in ((2, 3, 8, 10), (2, 3, 32, 10)):
        irregular = t2n.compile(Pool().eval(), (torch.randn(*shape),), t2n.TractNNEF.latest())
        text = irregular.graph_nnef
        assert "slice(" not in text and "concat(" not in text
        assert "tract_core_gather(" in text and "matmul(" in text
        assert irregular.check().ok


def test_uneven_averages_are_products_with_the_windows_on_the_right():
    """Each pooled axis moved last: one 2-D product by the constant windows' matrix on
    the right (a batch of small products with it on the left ran slower)."""

    class Pool(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.adaptive_avg_pool3d(x, 7)

    artifact = t2n.compile(Pool().eval(), (torch.randn(2, 2, 10, 12, 9),), t2n.TractNNEF.latest())
    products = [line.split("matmul(")[1] for line in artifact.graph_nnef.splitlines() if "matmul(" in line]
    assert len(products) == 3
    constants = {line.split("=")[0].strip() for line in artifact.graph_nnef.splitlines() if "variable<" in line}
    assert all(p.split(",")[1].strip() in constants for p in products), products
    assert artifact.check().ok


def test_the_maximum_of_a_whole_1d_axis_is_a_max_pool():
    """adaptive_max_pool1d(x, 1) as a max pool of the axis' length (as tract's ONNX
    loader builds it): faster after a convolution; 2-D keeps the reduction."""

    class Pool(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv1d(4, 4, 3, padding=1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.adaptive_max_pool1d(self.conv(x), 1)

    artifact = t2n.compile(Pool().eval(), (torch.randn(2, 4, 8),), t2n.TractNNEF.latest())
    assert "max_pool(" in artifact.graph_nnef and "max_reduce(" not in artifact.graph_nnef
    assert artifact.check().ok


def test_a_stored_operand_is_ranked_by_a_reshape():
    """A parameter broadcast against a higher-rank tensor gets its unit axes by a reshape,
    not an unsqueeze (tract runs the binary op 3x slower after an unsqueeze)."""

    class Scale(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.randn(8, 1, 1))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * self.w

    artifact = t2n.compile(Scale().eval(), (torch.randn(2, 8, 3, 3),), t2n.TractNNEF.latest())
    text = artifact.graph_nnef
    assert "reshape(w, shape = [1, 8, 1, 1])" in text and "unsqueeze(" not in text
    assert artifact.check().ok


def test_dead_attention_rows_are_zeroed_on_the_smaller_output():
    """A float mask that may leave a row without positions: the zeroing select reads the
    output ([.., L, Ev]) when it is no larger than the weights ([.., L, S])."""

    class Attend(nn.Module):
        def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
            return F.scaled_dot_product_attention(q, k, v, attn_mask=m)

    torch.manual_seed(0)
    q, k, v = torch.randn(1, 2, 6, 4), torch.randn(1, 2, 8, 4), torch.randn(1, 2, 8, 4)
    mask = torch.randn(1, 1, 6, 8)
    artifact = t2n.compile(Attend().eval(), (q, k, v, mask), t2n.TractNNEF.latest())
    last = [line for line in artifact.graph_nnef.splitlines() if "output_0 =" in line]
    assert last and "select(" in last[0]
    mask[..., 2, :] = float("-inf")
    want = Attend()(q, k, v, mask)
    assert artifact.check(inputs=[t.numpy() for t in (q, k, v, mask)], expected=[want.nan_to_num(0.0).numpy()]).ok


def test_group_norm_affine_reads_channels_by_flat_positions():
    """A group norm's weight and bias multiply (N, C, H·W), then one reshape gives the
    input's shape: tract runs that product along one contiguous axis faster."""

    class ConvNorm(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv, self.norm = nn.Conv2d(8, 8, 3, padding=1), nn.GroupNorm(2, 8)
            for p in self.norm.parameters():
                nn.init.uniform_(p, 0.5, 1.5)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.norm(self.conv(x))

    torch.manual_seed(0)
    artifact = t2n.compile(ConvNorm().eval(), (torch.randn(2, 8, 6, 5),), t2n.TractNNEF.latest())
    text = artifact.graph_nnef
    assert "rms_norm, shape = [2, 8, 30])" in text and "shape = [1, 8, 1])" in text
    assert "shape = [1, 8, 1, 1])" not in text
    assert artifact.check().ok
