"""A number read with ``.item()`` from a tensor computed only from the model's buffers and
sizes known at export (transformers' Mimi, EnCodec: a causal convolution's extra padding
from ``stride`` and ``kernel_size`` buffers) is folded by the export frontend, as the
TorchScript trace stores it; a number from the inputs' data, or from a size that stays a
symbol, is still refused by name. Checked in tract against PyTorch."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import t2n
from t2n.errors import ExportFrontendError


class PaddedFromBuffers(nn.Module):
    """Mimi's ``_get_extra_padding_for_conv1d``: the right padding that makes the last
    window whole, computed from buffers, read by ``pad`` as a number."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("stride", torch.tensor(3), persistent=False)
        self.register_buffer("kernel_size", torch.tensor(5))
        self.conv = nn.Conv1d(2, 4, 5, stride=3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        length = x.shape[-1]
        frames = torch.ceil((length - self.kernel_size + 4) / self.stride + 1).to(torch.int64) - 1
        extra = frames * self.stride + self.kernel_size - 4 - length
        return self.conv(nn.functional.pad(x, (4, extra)))  # as Mimi: the 0-d tensor read as a number


class PaddedFromData(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.pad(x, (0, int((x[0, 0, 0] > 0).long().item())))


@pytest.mark.parametrize("length", [11, 12, 13])
def test_a_number_from_buffers_and_static_sizes_is_folded(length: int) -> None:
    model = PaddedFromBuffers().eval()
    art = t2n.compile(model, (torch.randn(1, 2, length),), frontend="export")
    assert art.check().ok
    assert "item" not in str(art.ir) and "local_scalar" not in str(art.ir)


def test_a_number_from_input_data_is_still_refused() -> None:
    with pytest.raises(ExportFrontendError, match="data-dependent"):
        t2n.compile(PaddedFromData(), (torch.randn(1, 2, 5),), frontend="export")


def test_a_number_from_a_dynamic_size_is_still_refused() -> None:
    """With the length a symbol the padding is not a constant: not folded, refused."""
    with pytest.raises(ExportFrontendError, match="data-dependent"):
        t2n.compile(PaddedFromBuffers().eval(), (torch.randn(1, 2, 11),), frontend="export",
                    dynamic_axes={"input_0": {2: "T"}})
