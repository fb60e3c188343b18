"""The last step of JIT hardening: the hardened graph, run on the example inputs, must
give what the scripted model gave on them from the same starting state.

Hardening takes decisions from the example inputs (branches, sizes, unrolled loops,
attribute values); a wrong one would give an artifact that runs and computes
something else. This check makes that a :class:`~t2n.errors.HardeningMismatchError`
naming each differing output, before anything is lowered or written. Both sides run in
the same PyTorch on the same values, so they agree to float rounding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from t2n.errors import HardeningMismatchError
from t2n.frontend.io import flatten

if TYPE_CHECKING:
    from t2n.frontend.jit.harden import HardenedGraph

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


def _names(hardened: HardenedGraph, count: int) -> list[str]:
    state = [a.output_name for a in hardened.state]
    plain = count - len(state)
    return [f"output {i}" for i in range(plain)] + [f"attribute {a.path} after the call" for a in hardened.state]


def check_against_original(hardened: HardenedGraph) -> None:
    """Raise :class:`HardeningMismatchError` unless ``hardened`` reproduces its reference."""
    want, _, _ = flatten(hardened.reference)
    got_obj: Any = hardened(*[t.clone() for t in hardened.example_inputs])
    got, _, _ = flatten(got_obj)
    names = _names(hardened, len(want))
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
