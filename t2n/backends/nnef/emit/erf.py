"""erf spelled out in standard NNEF operations, for targets with no erf of their own.

Standard NNEF has no erf, and a fragment of t2n's own would have to be lowered by
every consumer (the Khronos parser needs ``lowered=``, the nnef-tools interpreter
``decomposed=``). So the graph body gets the expansion itself, one flat operation
a line: nothing but ``clamp``, ``abs``, ``mul``, ``add``, ``sub``, ``neg``,
``exp``, ``sign``, ``lt`` and ``select``.

Two pieces, fitted in float64 on Chebyshev nodes (a least-squares fit of
``erf(x)/x`` in ``x²`` below 0.75, and of the scaled complement ``exp(x²)·erfc(x)``
in ``s = (|x| - 2.375) / 1.625`` from 0.75 to 4):

- ``|x| < 0.75``: ``erf(x) = x · P(x²)``
- ``|x| ≥ 0.75``: ``erf(x) = sign(x) · (1 - exp(-x²) · Q(s))``, with ``x`` clamped
  to [-4, 4] (``1 - erf(4)`` is 1.5e-8, below float32's resolution at 1).

The complement form keeps the rounding of ``exp`` and ``Q`` multiplied by
``erfc(x)``, which is small where ``erf`` is near 1. Evaluated in float32 the
expansion is within 1.2e-7 of the exact erf over the whole real line (about one
float32 ulp at 0.8; PyTorch's own float32 erf is within 3.3e-8); the fits alone
are within 1.1e-9 and 1.7e-10.
"""

from __future__ import annotations

from t2n.backends.nnef.context import EmitContext, Raw
from t2n.ir import Value

SPLIT = 0.75
"""Below it the odd polynomial, from it on the complement form."""
CLAMP = 4.0
LARGE_CENTRE, LARGE_HALF_WIDTH = (SPLIT + CLAMP) / 2, (CLAMP - SPLIT) / 2

SMALL = (1.1283791656064066, -0.37612619702737266, 0.11283389808766198, -0.02683527604390326,
         0.005115658334370107, -0.0006758789145673587)
"""P, lowest power first: ``erf(x) = x · P(x²)`` for ``|x| < SPLIT``."""

LARGE = (0.22050569333953424, -0.131587838125282, 0.07442593348653063, -0.0401572880253261,
         0.020776117486749162, -0.01034710651812015, 0.004966138668156192,
         -0.002312199112163416, 0.0010766655534243756, -0.0004755437890605475,
         0.00015828632569289995, -6.486640085692242e-05, 5.9717881150554713e-05,
         -2.4254126594479747e-05)
"""Q, lowest power first: ``exp(x²)·erfc(|x|) = Q(s)`` for ``SPLIT ≤ |x| ≤ CLAMP``."""


def horner(ctx: EmitContext, hint: str, variable: str, coefficients: tuple[float, ...]) -> str:
    """``sum(c[i] * variable**i)``, one ``mul`` and one ``add`` a line."""
    acc = ctx.emit(f"{hint}_m", "mul", Raw(variable), coefficients[-1])
    for i, c in enumerate(reversed(coefficients[:-1])):
        acc = ctx.emit(f"{hint}_a", "add", Raw(acc), c)
        if i < len(coefficients) - 2:
            acc = ctx.emit(f"{hint}_m", "mul", Raw(acc), Raw(variable))
    return acc


def emit_erf(ctx: EmitContext, out: Value | str, x: Value | Raw) -> str:
    """Assign erf(``x``) to ``out`` (a Value or a temporary's hint) in standard operations."""
    xc = ctx.emit("erf_x", "clamp", x, -CLAMP, CLAMP)
    x2 = ctx.emit("erf_x2", "mul", Raw(xc), Raw(xc))
    ax = ctx.emit("erf_abs", "abs", Raw(xc))
    small = ctx.emit("erf_small", "mul", Raw(xc), Raw(horner(ctx, "erf_p", x2, SMALL)))
    shifted = ctx.emit("erf_s", "sub", Raw(ax), LARGE_CENTRE)
    s = ctx.emit("erf_s", "mul", Raw(shifted), 1.0 / LARGE_HALF_WIDTH)
    decay = ctx.emit("erf_e", "exp", Raw(ctx.emit("erf_nx2", "neg", Raw(x2))))
    tail = ctx.emit("erf_tail", "mul", Raw(decay), Raw(horner(ctx, "erf_q", s, LARGE)))
    large = ctx.emit("erf_large", "sub", 1.0, Raw(tail))
    signed = ctx.emit("erf_signed", "mul", Raw(ctx.emit("erf_sign", "sign", Raw(xc))), Raw(large))
    near_zero = ctx.emit("erf_near0", "lt", Raw(ax), SPLIT)
    return ctx.emit(out, "select", Raw(near_zero), Raw(small), Raw(signed))
