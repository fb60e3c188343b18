"""The IR ops Khronos NNEF has no form for, and why: the export is refused, naming each
such op at once, before anything is written. ``tests/backends/test_refusal_table.py``
holds this table against the emitters: every IR op has a Khronos emitter or a line here."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

_BITWISE = "standard NNEF has no bitwise operations (its integers have no arithmetic)"
_QUANTIZED = ("standard NNEF states quantization only as graph.quant annotations of real tensors; "
              "quantized arithmetic is written for tract only")
_SCATTER = "standard NNEF has no scatter"

REFUSALS: Mapping[str, str] = MappingProxyType({
    "bitand": _BITWISE, "bitor": _BITWISE, "bitxor": _BITWISE, "bitnot": _BITWISE,
    "cumsum": "standard NNEF has no cumulative sum (and no loop to write one)",
    "cumsum_scan": "standard NNEF has no loop",
    "quantize": _QUANTIZED, "dequantize": _QUANTIZED, "qconv": _QUANTIZED, "qlinear": _QUANTIZED,
    "scatter_elements": _SCATTER, "scatter_nd": _SCATTER,
    "grid_sample": "standard NNEF has no grid sampling",
    "prod_reduce": "standard NNEF has no product reduction",
    "range": "standard NNEF has no range: only one made of constants is exported (folded to a constant)",
    "shape_of": "Khronos NNEF shapes are static: only a size known at export time is exported",
    "topk": "standard NNEF has no top-k",
    "fft": "Khronos NNEF has no Fourier transform (nor complex tensors); export to TractNNEF, "
           "which runs tract_core_fft",
    "stft": "Khronos NNEF has no Fourier transform (nor complex tensors); export to TractNNEF, "
            "which runs tract_core_stft",
    "gated_delta_rule": "standard NNEF has no loop (a hybrid LLM's recurrence runs over a symbolic token count)",
    "ssm_scan": "standard NNEF has no loop (a hybrid LLM's recurrence runs over a symbolic token count)",
    "window_kv_sdpa": "a sliding-window cache keeps state between runs, which standard NNEF has no form for",
})
"""IR op → why Khronos NNEF cannot express it."""
