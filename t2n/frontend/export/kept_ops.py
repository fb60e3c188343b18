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
    _ATEN.pixel_shuffle.default, _ATEN.pixel_unshuffle.default, _ATEN.channel_shuffle.default,
    # recurrent layers: one tract scan each instead of the unrolled time steps
    _ATEN.lstm.input, _ATEN.gru.input, _ATEN.rnn_tanh.input, _ATEN.rnn_relu.input,
    _ATEN.lstm_cell.default, _ATEN.gru_cell.default,
    # norms with a fused or shorter form
    _ATEN.rms_norm.default, _ATEN.instance_norm.default,
    # one op where the decomposition gives index arithmetic or several reductions
    _ATEN.pad.default, _ATEN.einsum.default, _ATEN.bilinear.default, _ATEN.logsumexp.default,
    _ATEN.softmax.int, _ATEN.log_softmax.int, _ATEN.glu.default, _ATEN.mish.default,
    _ATEN.softplus.default, _ATEN.prelu.default, _ATEN.selu.default, _ATEN.celu.default,
    _ATEN.square.default, _ATEN.floor_divide.default, _ATEN.roll.default, _ATEN.diff.default,
    _ATEN.cosine_similarity.default, _ATEN.pairwise_distance.default,
    _ATEN.im2col.default, _ATEN.col2im.default,
    _ATEN.pad_sequence.default,  # one pad and a concat, not a full, pads, masks and a where per sequence
    # pooling: one tract pool op instead of strided views or a pool with indices
    _ATEN.avg_pool1d.default, _ATEN.max_pool1d.default, _ATEN.max_pool2d.default, _ATEN.max_pool3d.default,
    _ATEN.adaptive_avg_pool1d.default, _ATEN.adaptive_avg_pool2d.default, _ATEN.adaptive_avg_pool3d.default,
    _ATEN.adaptive_max_pool1d.default,
    # the unpool rule scatters into the plane, with no index arithmetic around it
    _ATEN.max_unpool2d.default, _ATEN.max_unpool3d.default,
    # short-time Fourier transforms: tract's framed FFT, and the overlap-add of the inverse
    # with static pads, instead of strided views and an index_put over the samples
    _ATEN.stft.default, _ATEN.stft.center, _ATEN.istft.default,
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
