"""Names that scripts written for the widely used exporter import beside the target
classes, so that switching to t2n changes only import lines."""

from __future__ import annotations

import enum

from t2n.check.compare import Tolerance

TractCheckTolerance = Tolerance
"""``check_io_tolerance`` levels under the other exporter's name (``TractCheckTolerance.SUPER``)."""


class TractFeatureFlag(enum.StrEnum):
    """tract feature flags a ``TractNNEF(feature_flags={...})`` may name."""

    DEFAULT = "default"
    COMPLEX = "complex"
