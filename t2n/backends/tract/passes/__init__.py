"""The passes that write a ``TractNNEF``'s own forms; ``TractNNEF.passes`` chooses them by
its options and version, and they run at the end of the compile pipeline (before its
last cleanup)."""

from __future__ import annotations

from t2n.backends.tract.passes.debox import DeboxUpsample
from t2n.backends.tract.passes.dynamic_sort import DynamicAxisSort
from t2n.backends.tract.passes.gru_sequence import GruSequence
from t2n.backends.tract.passes.moe import FuseMoeRouter
from t2n.backends.tract.passes.nearest_deconv import NearestAsDeconv
from t2n.backends.tract.passes.nearest_upsample import NearestUpsample
from t2n.backends.tract.passes.product_weights import UntieProductWeights
from t2n.backends.tract.passes.sdpa import ReifySdpa

__all__ = ["DeboxUpsample", "DynamicAxisSort", "FuseMoeRouter", "GruSequence", "NearestAsDeconv", "NearestUpsample", "ReifySdpa",
           "UntieProductWeights"]
