"""``force_inputs_dtype``: the graph's cache inputs and float outputs in another dtype
than the model computes in (e.g. an f16 model whose runtime holds its cache in f32).
The casts are part of the traced graph, at its edges."""

from __future__ import annotations

import attrs
import torch

from t2n.errors import InvalidArgumentError
from t2n.llm.common.layout import CacheLayout

DTYPES = {"f32": torch.float32, "f16": torch.float16}
"""``force_inputs_dtype`` names (tract computes bf16 as f16, so a bf16 interface is f16)."""


def check_inputs_dtype(value: object) -> None:
    if value is not None and value not in DTYPES:
        raise InvalidArgumentError(
            f"force_inputs_dtype must be one of {', '.join(DTYPES)} (or None: the model's own "
            f"dtype), got {value!r}")


class InterfaceDtype(torch.nn.Module):
    """``inner`` with its cache inputs cast to ``compute`` (one dtype per cache tensor:
    a hybrid model keeps its recurrent states in f32) and its float outputs (logits and
    cache) cast to ``interface``."""

    def __init__(self, inner: torch.nn.Module, compute: list[torch.dtype], interface: torch.dtype) -> None:
        super().__init__()
        self.inner = inner
        self.compute = compute
        self.interface = interface

    def forward(self, input_ids: torch.Tensor, *past: torch.Tensor) -> tuple[torch.Tensor, ...]:
        outputs = self.inner(input_ids, *(p.to(dtype) for p, dtype in zip(past, self.compute)))
        return tuple(o.to(self.interface) if o.is_floating_point() else o for o in outputs)


def with_inputs_dtype(wrapper: torch.nn.Module, layout: CacheLayout, name: str | None
                      ) -> tuple[torch.nn.Module, CacheLayout]:
    """The module to trace and its cache layout when the interface is ``name``."""
    if name is None or all(dtype == DTYPES[name] for dtype in [layout.dtype, *layout.dtypes()]):
        return wrapper, layout
    interface = DTYPES[name]
    states = tuple(attrs.evolve(s, dtype=interface) for s in layout.states)
    return (InterfaceDtype(wrapper, layout.dtypes(), interface).eval(),
            attrs.evolve(layout, dtype=interface, states=states))
