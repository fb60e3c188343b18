"""Quiet torch.ao.quantization's deprecation warnings; run PyTorch's quantized kernels
with fbgemm unless a test picks another engine (both fbgemm and qnnpack run here)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pytest
import torch


@pytest.fixture(autouse=True)
def _quiet_quantization_warnings() -> Iterator[None]:
    """torch.ao.quantization warns about its own deprecation on every call."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", UserWarning)
        yield


@pytest.fixture(autouse=True)
def _engine() -> Iterator[None]:
    before = torch.backends.quantized.engine
    torch.backends.quantized.engine = "fbgemm"
    yield
    torch.backends.quantized.engine = before


