"""Fourier transforms (IR ``fft`` and ``stft``): tract's ``tract_core_fft`` and
``tract_core_stft``, which take complex numbers as a trailing axis of 2 as the IR does.
tract reads the STFT window only as a constant tensor. (Khronos NNEF has no Fourier
transform: ``t2n.backends.khronos.refusals`` names them.)"""

from __future__ import annotations

from t2n.backends.nnef.context import EmitContext, EmitterTable, Raw
from t2n.ir import Op, Trait

TRACT = EmitterTable("spectral/tract")


@TRACT.emitter("fft")
def fft(ctx: EmitContext, op: Op) -> None:
    ctx.emit(op.output, "tract_core_fft", op.inputs[0], axis=int(op.attrs["axis"]),
             inverse=bool(op.attrs["inverse"]))


@TRACT.emitter("stft")
def stft(ctx: EmitContext, op: Op) -> None:
    attrs = {"axis": int(op.attrs["axis"]), "frame": int(op.attrs["frame"]), "stride": int(op.attrs["stride"])}
    if len(op.inputs) > 1:
        window = op.inputs[1]
        if window.producer is None or not window.producer.has(Trait.CONSTANT_LIKE):
            ctx.unsupported("tract's STFT takes its window only as a constant tensor, and this one is "
                            "computed from the inputs: make the window a buffer or a constant "
                            "(torch.hann_window(n) in forward is one)")
            return
        ctx.emit(op.output, "tract_core_stft", op.inputs[0], window=Raw(ctx.arg(window)), **attrs)
        return
    ctx.emit(op.output, "tract_core_stft", op.inputs[0], **attrs)
