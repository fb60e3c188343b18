"""``F.max_unpool{1,2,3}d`` while the model is traced.

PyTorch's own Python for these functions checks the output size with
``torch._check_value(size >= 0)``; under ``torch.jit.trace`` a size is a traced
tensor, so that check raises ``TypeError`` and no model with a ``MaxUnpool`` layer
traces. The trace watch (a thread-local ``TorchFunctionMode``) sends these calls here
instead: the same argument handling and size checks, then the ATen op PyTorch would
call (``aten::max_unpool2d`` / ``max_unpool3d``), recorded with the size arithmetic
(so a dynamic axis stays dynamic). Nothing of PyTorch is patched.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from t2n.frontend import torch_private


def _spatial(fn: Any) -> int | None:
    return {F.max_unpool1d: 1, F.max_unpool2d: 2, F.max_unpool3d: 3}.get(fn)


def _per_axis(value: Any, n: int) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value] * n


def _output_size(x: torch.Tensor, kernel: list[int], stride: list[int], padding: list[int],
                 given: Any) -> list[Any]:
    """PyTorch's unpool output size: ``(in - 1) * stride + kernel - 2 * padding``, or the
    given ``output_size`` when within one stride of it (else PyTorch's ``ValueError``)."""
    n = len(kernel)
    size = x.size()
    default = [(size[-n + d] - 1) * stride[d] + kernel[d] - 2 * padding[d] for d in range(n)]
    if given is None:
        return default
    wanted = list(given)[-n:] if len(given) == n + 2 else list(given)
    if len(wanted) != n:
        raise ValueError(f"output_size should be a sequence containing {n} or {n + 2} elements, "
                         f"but it has a length of '{len(wanted)}'")
    for d in range(n):
        low, high = int(default[d]) - stride[d], int(default[d]) + stride[d]
        if not low < int(wanted[d]) < high:
            raise ValueError(f'invalid output_size "{list(given)}" (dim {d} must be between {low} and {high})')
    return wanted


def traced_max_unpool(fn: Any) -> Callable[..., torch.Tensor] | None:
    """The replacement of ``fn`` while tracing, if ``fn`` is a ``max_unpool`` function."""
    n = _spatial(fn)
    if n is None:
        return None
    signature = inspect.signature(fn)

    def call(*args: Any, **kwargs: Any) -> torch.Tensor:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        a = bound.arguments
        x, indices = a["input"], a["indices"]
        kernel = _per_axis(a["kernel_size"], n)
        stride = kernel if a["stride"] is None else _per_axis(a["stride"], n)
        padding = _per_axis(a["padding"], n)
        size = _output_size(x, kernel, stride, padding, a["output_size"])
        if n == 1:
            out = torch_private.max_unpool(x.unsqueeze(-1), indices.unsqueeze(-1), [*size, 1], [], [])
            return out.squeeze(-1)
        return torch_private.max_unpool(x, indices, size, stride, padding)

    return call


__all__ = ["traced_max_unpool"]
