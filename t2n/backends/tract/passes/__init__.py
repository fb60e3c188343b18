"""The passes that write a ``TractNNEF``'s own forms, chosen by its options and version
and run at the end of the compile pipeline (before its last cleanup)."""

from __future__ import annotations

from typing import Any

from t2n.backends.tract.passes.debox import DeboxUpsample
from t2n.backends.tract.passes.nearest_deconv import NearestAsDeconv
from t2n.backends.tract.passes.sdpa import ReifySdpa
from t2n.passes.base import Pass


def tract_form_passes(target: Any) -> list[Pass]:
    """The passes a ``TractNNEF``'s options ask for, where its version has the op."""
    out: list[Pass] = []
    if getattr(target, "reify_sdpa_operator", False) and target.at_least("0.22.0"):
        out.append(ReifySdpa())
    if getattr(target, "upsample_with_debox", False) and target.at_least("0.23.0"):
        out.append(DeboxUpsample())
    if getattr(target, "name", None) == "tract" and target.at_least("0.23.0"):
        out.append(NearestAsDeconv())
    return out


__all__ = ["DeboxUpsample", "NearestAsDeconv", "ReifySdpa", "tract_form_passes"]
