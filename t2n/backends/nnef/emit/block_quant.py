"""Variables holding Q4_0 weights (made by ``t2n.quantize``): what both targets ask of
them. tract writes them as blocks where its operations take them
(:mod:`t2n.backends.tract.emit.block_quant`); Khronos NNEF has no block-quantized type
and refuses them (:mod:`t2n.backends.khronos.emit.block_quant`).
"""

from __future__ import annotations

from t2n.ir import TensorData
from t2n.ir.tensor_data import ConvertedData
from t2n.quant.q4_0 import is_q4_0


def q4_0_data(data: TensorData) -> TensorData | None:
    """The Q4_0 data a variable holds (under a bf16 → f16/f32 conversion too: its values
    are those of the blocks in any float type), or None."""
    if isinstance(data, ConvertedData) and is_q4_0(data.source):
        return data.source
    return data if is_q4_0(data) else None
