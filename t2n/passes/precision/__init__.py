"""f32-forcing passes: parts of a reduced-precision (f16) model computed in f32.

``force-attention-inner-in-f32``, ``force-linear-accumulation-in-f32`` and
``force-norm-in-f32`` each find their regions by pattern in the IR and cast at the
regions' boundaries only (:mod:`t2n.passes.precision.regions`). ``TractNNEF``'s options
of the same names (with ``_``) add them to the default pipeline
(``Target.forced_f32_passes``); a pipeline spec can name them too.

They are tract-only: standard NNEF has no per-tensor numeric precision (its tensors are
``scalar``, ``integer`` or ``logical`` and the consumer picks the precision), so a cast
to f32 means nothing there and :func:`check_forcing_target` refuses them for any other
target.
"""

from __future__ import annotations

from t2n.errors import InvalidArgumentError
from t2n.passes.base import Pass
from t2n.passes.manager import PassManager
from t2n.passes.precision.attention import ForceAttentionInnerInF32
from t2n.passes.precision.base import ForceF32Pass
from t2n.passes.precision.linear import ForceLinearAccumulationInF32
from t2n.passes.precision.norm import ForceNormInF32
from t2n.passes.precision.regions import F32Rewriter, Region


def precision_passes() -> dict[str, Pass]:
    """The f32-forcing passes by their pipeline names."""
    return {p.name: p for p in (ForceAttentionInnerInF32(), ForceLinearAccumulationInF32(), ForceNormInF32())}


def _stages(p: Pass) -> list[Pass]:
    if isinstance(p, PassManager):
        return [s for q in p.passes for s in _stages(q)]
    return [p]


def check_forcing_target(pipeline: Pass, *, target: str, allowed: bool) -> None:
    """Refuse f32-forcing passes anywhere in ``pipeline`` when ``target`` cannot honour
    a cast (``allowed=False``), naming each pass."""
    if allowed:
        return
    found = sorted({p.display_name for p in _stages(pipeline) if isinstance(p, ForceF32Pass)})
    if found:
        raise InvalidArgumentError(
            f"{', '.join(found)} cannot run for {target}: standard NNEF has no per-tensor numeric "
            "precision (tensors are 'scalar' and the consumer picks the precision), so a cast to f32 "
            "means nothing there; export to TractNNEF(...) with force_*_in_f32=True, or remove "
            f"{'it' if len(found) == 1 else 'them'} from passes"
        )


__all__ = ["F32Rewriter", "ForceAttentionInnerInF32", "ForceF32Pass",
           "ForceLinearAccumulationInF32", "ForceNormInF32", "Region", "check_forcing_target",
           "precision_passes"]
