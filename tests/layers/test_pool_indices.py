"""Max pooling with indices and max_unpool (SegNet-style encoder-decoders): PyTorch's
indices and unpooled planes in tract, exactly; Khronos refused by name where the
indices are read; bad inputs give typed errors."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from t2n.testing import Lambda, check_dynamic, check_export


class PoolWithIndices(nn.Module):
    """Both outputs of a pool made with return_indices=True."""

    def __init__(self, pool: nn.Module) -> None:
        super().__init__()
        self.pool = pool

    def forward(self, x):
        values, indices = self.pool(x)
        return values, indices


def _ties(*shape: int) -> torch.Tensor:
    """Few distinct values: many windows hold their maximum twice (PyTorch keeps the first)."""
    return torch.randint(0, 3, shape).float()


@pytest.mark.parametrize("pool, shape", [
    (nn.MaxPool1d(3, stride=2, padding=1, return_indices=True), (2, 3, 11)),
    (nn.MaxPool1d(2, ceil_mode=True, return_indices=True), (1, 3, 9)),
    (nn.MaxPool1d(3, return_indices=True), (3, 10)),
    (nn.MaxPool2d(3, stride=2, dilation=2, return_indices=True), (1, 2, 11, 12)),
    (nn.MaxPool2d((2, 3), stride=(2, 1), padding=(1, 1), ceil_mode=True, return_indices=True), (1, 2, 7, 8)),
    (nn.MaxPool2d(2, return_indices=True), (3, 6, 6)),
    (nn.MaxPool3d(2, stride=2, ceil_mode=True, return_indices=True), (1, 2, 5, 6, 7)),
    (nn.MaxPool3d((1, 3, 2), stride=(1, 2, 1), padding=(0, 1, 1), return_indices=True), (2, 1, 3, 6, 5)),
], ids=["1d-pad-stride", "1d-ceil", "1d-unbatched", "2d-dilated", "2d-pad-ceil", "2d-unbatched",
        "3d-ceil", "3d-pad-stride"])
def test_max_pool_indices_are_pytorchs(pool, shape):
    torch.manual_seed(0)
    res = check_export(PoolWithIndices(pool), (torch.randn(*shape),), khronos_refuses="max_pool")
    assert "indices of a max pool" in str(res.refused["khronos"])
    assert "max_pool_with_index(" in res.artifacts["tract"].graph_nnef


def test_ties_keep_the_first_maximum():
    torch.manual_seed(0)
    pool = nn.MaxPool2d(3, stride=2, padding=1, return_indices=True)
    check_export(PoolWithIndices(pool), (_ties(2, 3, 9, 8),), targets=("tract",), tolerance="exact")
    adaptive = nn.AdaptiveMaxPool2d((3, 4), return_indices=True)
    check_export(PoolWithIndices(adaptive), (_ties(1, 2, 8, 9),), targets=("tract",), tolerance="exact")


@pytest.mark.parametrize("pool, shape, khronos", [
    (nn.AdaptiveMaxPool1d(3, return_indices=True), (1, 3, 10), True),
    (nn.AdaptiveMaxPool1d(4, return_indices=True), (2, 3, 8), True),
    (nn.AdaptiveMaxPool2d((4, 3), return_indices=True), (1, 2, 9, 7), True),
    (nn.AdaptiveMaxPool2d(2, return_indices=True), (1, 2, 8, 6), True),
    (nn.AdaptiveMaxPool2d((None, 2), return_indices=True), (1, 2, 5, 7), True),
    (nn.AdaptiveMaxPool2d(1, return_indices=True), (2, 3, 5, 7), False),
    (nn.AdaptiveMaxPool3d((2, 3, 1), return_indices=True), (1, 2, 5, 7, 4), True),
], ids=["1d-uneven", "1d-even", "2d-uneven", "2d-even", "2d-keep-axis", "2d-global", "3d"])
def test_adaptive_max_pool_indices(pool, shape, khronos):
    """Even windows: one pool with indices; uneven: one axis at a time; one window over
    the plane: the flat argmax, which standard NNEF has too."""
    torch.manual_seed(0)
    refusal = "aten::adaptive_max_pool" if khronos else False
    res = check_export(PoolWithIndices(pool), (torch.randn(*shape),), khronos_refuses=refusal)
    if khronos:
        assert f"aten::adaptive_max_pool{len(shape) - 2}d" in str(res.refused["khronos"])


@pytest.mark.parametrize("pool, unpool, shape", [
    (nn.MaxPool1d(2, return_indices=True), nn.MaxUnpool1d(2), (1, 3, 10)),
    (nn.MaxPool2d(2, return_indices=True), nn.MaxUnpool2d(2), (2, 3, 8, 6)),
    (nn.MaxPool2d(3, stride=2, return_indices=True), nn.MaxUnpool2d(3, stride=2), (1, 2, 9, 11)),
    (nn.MaxPool2d(3, stride=2, padding=1, return_indices=True), nn.MaxUnpool2d(3, stride=2, padding=1),
     (1, 2, 9, 9)),
    (nn.MaxPool2d(2, return_indices=True), nn.MaxUnpool2d(2), (3, 8, 6)),
    (nn.MaxPool3d(2, return_indices=True), nn.MaxUnpool3d(2), (1, 2, 4, 6, 4)),
], ids=["1d", "2d", "2d-stride-not-kernel", "2d-padded", "2d-unbatched", "3d"])
def test_max_unpool_restores_the_plane(pool, unpool, shape):
    torch.manual_seed(0)

    def roundtrip(x):
        values, indices = pool(x)
        return unpool(values * 2.0, indices)

    res = check_export(Lambda(roundtrip), (torch.randn(*shape),), khronos_refuses="max_unpool")
    text = res.artifacts["tract"].graph_nnef
    assert "tract_core_scatter_elements" in text and " lt(" not in text


def test_max_unpool_to_a_given_output_size():
    """An odd input: the pool drops the last row and column, output_size brings them back."""
    pool, unpool = nn.MaxPool2d(2, return_indices=True), nn.MaxUnpool2d(2)

    def roundtrip(x):
        values, indices = pool(x)
        line, where = F.max_pool1d(x[:, :, 0], 2, return_indices=True)
        return unpool(values, indices, output_size=x.shape[-2:]), F.max_unpool1d(line, where, 2, output_size=[7])

    check_export(Lambda(roundtrip), (torch.randn(1, 2, 7, 7),), targets=("tract",))


class SegNetLike(nn.Module):
    """Two encoder stages (conv, pool with indices), two decoder stages (unpool with
    those indices, conv): the SegNet pattern."""

    def __init__(self) -> None:
        super().__init__()
        self.enc1, self.enc2 = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 8, 3, padding=1)
        self.pool = nn.MaxPool2d(2, return_indices=True)
        self.unpool = nn.MaxUnpool2d(2)
        self.dec2, self.dec1 = nn.Conv2d(8, 8, 3, padding=1), nn.Conv2d(8, 4, 3, padding=1)

    def forward(self, x):
        x, i1 = self.pool(torch.relu(self.enc1(x)))
        x, i2 = self.pool(torch.relu(self.enc2(x)))
        x = torch.relu(self.dec2(self.unpool(x, i2)))
        return self.dec1(self.unpool(x, i1))


def test_segnet_like_encoder_decoder():
    torch.manual_seed(0)
    res = check_export(SegNetLike(), (torch.randn(2, 3, 16, 12),), khronos_refuses="max_unpool2d")
    text = res.artifacts["tract"].graph_nnef
    assert text.count("max_pool_with_index(") == 2
    assert " lt(" not in text, "indices straight from the matching pool need no range guard"


def test_segnet_like_over_dynamic_height_and_width():
    torch.manual_seed(0)
    check_dynamic(SegNetLike(), lambda H, W: (torch.randn(1, 3, H, W),), {"x": {2: "H", 3: "W"}},
                  [{"H": 16, "W": 12}, {"H": 8, "W": 20}], input_names=["x"])


def test_indices_given_as_an_input():
    """Indices from outside the model; one out of the plane at run time writes nothing
    (PyTorch raises; tract would abort the process on such a scatter index)."""
    values = torch.randn(1, 2, 3, 3)
    indices = torch.randint(0, 36, (1, 2, 3, 3))
    res = check_export(Lambda(lambda v, i: F.max_unpool2d(v, i, 2)), (values, indices),
                       targets=("tract",), input_names=["v", "i"])
    art = res.artifacts["tract"]
    assert " lt(" in art.graph_nnef
    bad = indices.clone()
    bad[0, 0, 0, 0], bad[0, 1, 2, 2] = 36, -1
    expected = torch.zeros(1, 2, 36)
    flat_v, flat_i = values.reshape(1, 2, 9), bad.reshape(1, 2, 9)
    for c in range(2):
        for k in range(9):
            if 0 <= int(flat_i[0, c, k]) < 36:
                expected[0, c, int(flat_i[0, c, k])] = flat_v[0, c, k]
    art.check("exact", inputs=[values.numpy(), bad.numpy()], expected=[expected.reshape(1, 2, 6, 6).numpy()])


def test_khronos_exports_a_pool_whose_indices_are_dropped():
    """return_indices=True with only the values used: a plain max_pool on Khronos too."""
    pool = nn.MaxPool2d(3, stride=2, padding=1, return_indices=True)
    adaptive = nn.AdaptiveMaxPool2d((3, 2), return_indices=True)
    res = check_export(Lambda(lambda x: pool(x)[0] + 1.0), (torch.randn(1, 2, 8, 8),))
    assert "max_pool(" in res.artifacts["khronos"].graph_nnef
    check_export(Lambda(lambda x: adaptive(x)[0]), (torch.randn(1, 2, 7, 8),))
