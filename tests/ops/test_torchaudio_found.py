"""Constructs the zoo's torchaudio group found missing, each as a small model run in tract
against PyTorch (the zoo runs the full models, see tests/zoo/torchaudio_models.py)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import t2n
from t2n.errors import UnsupportedOpsError
from t2n.testing import check_export


class ComplexPad(nn.Module):
    """HDemucs' ``_ispec``: ``F.pad`` of a complex spectrogram (one more frequency bin,
    two frames each side) before its inverse STFT."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = torch.view_as_complex(x) * 2
        z = nn.functional.pad(z, [0, 0, 0, 1])
        return torch.view_as_real(nn.functional.pad(z, [2, 2]))


class ComplexReflect(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.view_as_real(nn.functional.pad(torch.view_as_complex(x), [1, 1], mode="reflect"))


def test_zero_padding_a_complex_tensor() -> None:
    check_export(ComplexPad(), (torch.randn(1, 2, 5, 6, 2),), targets=("tract",))


@pytest.mark.slow
def test_zero_padding_a_complex_tensor_read_by_export() -> None:
    check_export(ComplexPad(), (torch.randn(1, 2, 5, 6, 2),), targets=("tract",), frontend="export")


def test_reflect_padding_a_complex_tensor_is_refused() -> None:
    """Only zero padding is followed through the (real, imaginary) pair; other modes are typed refusals."""
    with pytest.raises(UnsupportedOpsError, match="reflect padding of a complex tensor"):
        t2n.compile(ComplexReflect(), (torch.randn(1, 2, 5, 2),), frontend="jit")
