"""The last step of JIT hardening: the hardened graph, run on the example inputs, must
give what the scripted model gave on them from the same starting state.

Hardening takes decisions from the example inputs (branches, sizes, unrolled loops,
attribute values); a wrong one would give an artifact that runs and computes
something else. This check makes that a :class:`~t2n.errors.HardeningMismatchError`
naming each differing output, before anything is lowered or written. Both sides run in
the same PyTorch on the same values, so they agree to float rounding.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from t2n.errors import HardeningMismatchError
from t2n.frontend.io import flatten

RTOL = 1e-4
ATOL = 1e-5


def _difference(got: torch.Tensor, want: torch.Tensor) -> str | None:
    """Why ``got`` is not ``want`` (None when they agree to float rounding)."""
    if got.shape != want.shape:
        return f"shape {list(got.shape)} instead of {list(want.shape)}"
    if got.dtype != want.dtype:
        return f"dtype {got.dtype} instead of {want.dtype}"
    if want.numel() == 0:
        return None
    if not (want.is_floating_point() or want.is_complex()):
        return None if torch.equal(got, want) else "different values"
    a, b = got.detach().double(), want.detach().double()
    same_nan = torch.isnan(a) == torch.isnan(b)
    close = torch.isclose(a, b, rtol=RTOL, atol=ATOL, equal_nan=True)
    if bool(close.all()) and bool(same_nan.all()):
        return None
    finite = torch.isfinite(a) & torch.isfinite(b)
    err = float((a - b)[finite].abs().max()) if bool(finite.any()) else float("nan")
    return f"max abs difference {err:.3g}"


def _names(count: int, state_paths: Sequence[str]) -> list[str]:
    plain = count - len(state_paths)
    return [f"output {i}" for i in range(plain)] + [f"attribute {p} after the call" for p in state_paths]


def check_against_original(run: Callable[..., Any], example_inputs: Sequence[torch.Tensor], reference: Any,
                           state_paths: Sequence[str]) -> None:
    """Raise :class:`HardeningMismatchError` unless ``run`` (the hardened graph) gives
    ``reference`` (the scripted model's outputs, then the values of the attributes at
    ``state_paths`` after the call) on ``example_inputs``."""
    want, _, _ = flatten(reference)
    got, _, _ = flatten(run(*[t.clone() for t in example_inputs]))
    names = _names(len(want), state_paths)
    if len(got) != len(want):
        raise HardeningMismatchError(
            f"the hardened graph returns {len(got)} tensors where the scripted model returns "
            f"{len(want)} ({', '.join(names)}); nothing was exported. This is a t2n defect: "
            "please report it with the model", names)
    problems = [(n, why) for n, g, w in zip(names, got, want) if (why := _difference(g, w)) is not None]
    if problems:
        listed = "; ".join(f"{n}: {why}" for n, why in problems)
        raise HardeningMismatchError(
            "the graph JIT hardening made for the example inputs does not compute what the "
            f"scripted model computes on them from the same starting state ({listed}); nothing "
            "was exported. What to do: report it with the model; meanwhile trace the model "
            "(torch.jit.trace of its Python module) or pass auto_harden_jit=False",
            [n for n, _ in problems])
