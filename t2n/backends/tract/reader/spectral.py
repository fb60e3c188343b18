"""tract's Fourier transforms (``tract_core_fft``, ``tract_core_stft``), read as the IR's
``fft`` and ``stft``, whose attributes they write under the same names."""

from __future__ import annotations

from t2n.backends.nnef.reader.infer_elementwise import via_ir
from t2n.backends.nnef.reader.optable import Args, ReadOpTable, TensorVal

TRACT = ReadOpTable("spectral/tract")


@TRACT.op("tract_core_fft", "input, axis, inverse = false")
def _fft(a: Args) -> list[TensorVal]:
    return [TensorVal(via_ir("fft", [a.tensor("input")], {"axis": a.integer("axis"),
                                                          "inverse": a.flag("inverse")}).type)]


@TRACT.op("tract_core_stft", "input, axis, frame, stride, window = 0.0")
def _stft(a: Args) -> list[TensorVal]:
    x = a.tensor("input")
    window = a.raw("window")
    operands = [x] if not isinstance(window, TensorVal) else [x, a.tensor("window")]
    attrs = {"axis": a.integer("axis"), "frame": a.integer("frame"), "stride": a.integer("stride")}
    return [TensorVal(via_ir("stft", operands, attrs, align=False).type)]
