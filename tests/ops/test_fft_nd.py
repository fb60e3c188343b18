"""Fourier transforms over several axes (torch.fft.fftn/fft2/rfftn/irfftn and their
inverses, FNet's mixing layer), and every torch.fft call through the export frontend,
where torch.export decomposes them into ``_fft_c2c/_fft_r2c/_fft_c2r`` (with a cast to a
complex dtype and zero padding of complex tensors). Each runs in tract against PyTorch;
Khronos NNEF refuses the transforms by name."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from test_spectral import Fn, real  # the same wrappers as the 1-D transforms
from torch import nn

from t2n.testing import check_export

X = torch.randn(2, 6, 8, generator=torch.Generator().manual_seed(0))

CASES: dict[str, Callable[[torch.Tensor], object]] = {
    "fftn_all_axes": lambda x: real(torch.fft.fftn(x)),
    "fftn_two_axes_real_part": lambda x: torch.fft.fftn(x, dim=(-2, -1)).real,  # FNet
    "fftn_sizes_only": lambda x: real(torch.fft.fftn(x, s=(3, 5), norm="forward")),
    "ifftn_of_fftn": lambda x: torch.fft.ifftn(torch.fft.fftn(x, dim=(0, 2)), dim=(0, 2)).real,
    "fft2_padded_ortho": lambda x: real(torch.fft.fft2(x, s=(4, 10), norm="ortho")),
    "ifft2_forward": lambda x: real(torch.fft.ifft2(torch.fft.fft2(x), norm="forward")),
    "rfft2": lambda x: real(torch.fft.rfft2(x)),
    "rfftn_odd_last": lambda x: real(torch.fft.rfftn(x, s=(5, 7), norm="ortho")),
    "irfft2_roundtrip": lambda x: torch.fft.irfft2(torch.fft.rfft2(x), s=(6, 8)),
    "irfftn_default_length": lambda x: torch.fft.irfftn(torch.fft.rfftn(x, dim=(1, 2)), dim=(1, 2)),
    "irfftn_odd_ortho": lambda x: torch.fft.irfftn(torch.fft.rfftn(x), s=(2, 6, 7), norm="ortho"),
    "one_axis_calls": lambda x: (real(torch.fft.fft(x)), real(torch.fft.rfft(x, n=7)),
                                 torch.fft.irfft(torch.fft.rfft(x), n=8), torch.fft.ifft(x, dim=1).imag),
}


@pytest.mark.parametrize("case", list(CASES))
def test_fourier_transforms_over_several_axes(case: str) -> None:
    check_export(Fn(CASES[case]), (X,), khronos_refuses="fft")


@pytest.mark.parametrize("case", list(CASES))
def test_fourier_transforms_through_torch_export(case: str) -> None:
    check_export(Fn(CASES[case]), (X,), khronos_refuses="fft", frontend="export")


def test_an_fnet_style_mixing_layer_matches_in_tract() -> None:
    """Token mixing by a 2-D transform's real part inside a residual block."""

    class Mixing(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = nn.LayerNorm(8)
            self.ff = nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            mixed = self.norm(x + torch.fft.fft(torch.fft.fft(x, dim=-1), dim=-2).real)
            return self.ff(mixed) + torch.fft.fftn(x, dim=(1, 2)).real

    for frontend in ("jit", "export"):
        check_export(Mixing().eval(), (X,), khronos_refuses="fft", frontend=frontend)
