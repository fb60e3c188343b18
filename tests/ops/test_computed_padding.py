"""Sizes a model computes from its buffers, constants and the example's shapes are
numbers at export: the padding of EnCodec's and Mimi's convolutions (int64 buffers
through a float division and a ``ceil``), and the index lists and ranges of a mask the
model builds itself (Longformer's global tokens). Sizes read from input data are still
refused."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from t2n.errors import UnsupportedOpsError
from t2n.testing import check_export, check_fn


class BufferPaddedConv(nn.Module):
    """EnCodec's ``EncodecConv1d``: the padding is computed from size buffers and the length."""

    def __init__(self, kernel: int, stride: int, mode: str) -> None:
        super().__init__()
        self.conv = nn.Conv1d(2, 3, kernel, stride)
        self.mode = mode
        self.stride = nn.Buffer(torch.tensor(stride), persistent=False)
        self.kernel_size = nn.Buffer(torch.tensor(kernel), persistent=False)
        self.padding_total = nn.Buffer(torch.tensor(kernel - stride), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        length = x.shape[-1]
        n_frames = (length - self.kernel_size + self.padding_total) / self.stride + 1
        n_frames = torch.ceil(n_frames).to(torch.int64) - 1
        ideal = n_frames * self.stride + self.kernel_size - self.padding_total
        extra = ideal - length
        right = self.padding_total // 2
        left = self.padding_total - right
        return self.conv(nn.functional.pad(x, (left, right + extra), self.mode))


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate"])
@pytest.mark.parametrize("kernel, stride, length", [(4, 2, 9), (7, 3, 16), (3, 1, 5)])
def test_padding_computed_from_buffers_folds(mode: str, kernel: int, stride: int, length: int) -> None:
    check_export(BufferPaddedConv(kernel, stride, mode), (torch.randn(1, 2, length),))


def test_padding_read_from_input_data_is_refused() -> None:
    with pytest.raises(UnsupportedOpsError, match=r"aten::pad[\s\S]*computed in the model"):
        check_fn(lambda x, n: nn.functional.pad(x, (0, n.sum())), torch.randn(1, 4), torch.tensor([1, 2]),
                 targets=("tract",))


def global_token_scores(x: torch.Tensor) -> torch.Tensor:
    """Longformer's global-attention bookkeeping over a mask built from constants: a float
    mask, ``nonzero(as_tuple=True)``, a range to the largest count, ``narrow`` and
    ``new_zeros`` sized by that count."""
    mask = torch.zeros(x.shape[0], x.shape[1])
    mask[:, 0] = 1.0
    mask[:, 3] = 1.0
    is_global = mask > 0
    count = is_global.long().sum(dim=1)
    most = count.max()
    rows, cols = is_global.nonzero(as_tuple=True)
    local = torch.arange(most) < count.unsqueeze(-1)
    slots = x.new_zeros(x.shape[0], most, x.shape[2])
    slots[local.nonzero(as_tuple=True)] = x[rows, cols]
    return slots * 2 + x.narrow(1, 0, most)


def test_sizes_from_a_mask_the_model_builds_fold() -> None:
    check_fn(global_token_scores, torch.randn(2, 6, 3), targets=("tract",))
