"""The ops kept whole when an ExportedProgram is decomposed to core ATen.

``run_decompositions()`` would break these into many small ops. t2n's rules for them
give tract's own fused forms (linear → one matmul with bias, layer norm → one
reduction chain, attention → tract's sdpa, upsample → tract's resize) or a shorter,
exact graph, so they are taken out of the decomposition table. Each name here has a
rule in the default registry (a test checks it).
"""

from __future__ import annotations

from typing import Any

import torch

_ATEN = torch.ops.aten

KEPT_OPS: tuple[Any, ...] = (
    _ATEN.linear.default,
    _ATEN.matmul.default,
    _ATEN.conv1d.default, _ATEN.conv2d.default, _ATEN.conv3d.default,
    _ATEN.conv_transpose1d.default, _ATEN.conv_transpose2d.input, _ATEN.conv_transpose3d.input,
    _ATEN.layer_norm.default,
    _ATEN.group_norm.default,
    _ATEN.scaled_dot_product_attention.default,
    _ATEN.silu.default, _ATEN.hardswish.default, _ATEN.hardsigmoid.default,
    _ATEN.upsample_nearest1d.vec, _ATEN.upsample_nearest2d.vec, _ATEN.upsample_nearest3d.vec,
    _ATEN.upsample_linear1d.vec, _ATEN.upsample_bilinear2d.vec, _ATEN.upsample_trilinear3d.vec,
    _ATEN.upsample_bicubic2d.vec,
    _ATEN.pixel_shuffle.default, _ATEN.pixel_unshuffle.default,
)
"""OpOverloads that ``decomposition_table`` leaves whole (see the module docstring)."""


def decomposition_table() -> Any:
    """torch.export's core-ATen decomposition table without the kept ops."""
    table = torch.export.default_decompositions()
    for op in KEPT_OPS:
        if op in table:
            del table[op]
    return table


def kind_of(op: Any) -> str:
    """``torch.ops.aten.relu.default`` → ``aten::relu``: the name rules are registered
    under (the overload name is dropped, as in TorchScript node kinds)."""
    schema = getattr(op, "_schema", None)
    if schema is not None:
        return str(schema.name)
    return getattr(op, "__name__", repr(op))
