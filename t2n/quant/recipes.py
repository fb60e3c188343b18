"""Quantization recipes: which weights of a model become Q4_0, and how each block's
scale is calibrated.

* ``min_max_q4_0``: the weights of every ``nn.Linear``, ``nn.Conv1d`` and ``nn.Conv2d``
  (a convolution's row is one output channel: ``in_channels / groups`` times the kernel
  size values, which must split into blocks of 32). A block's scale is chosen as in
  GGML: ``d = m / -8``, ``m`` the block's value of largest magnitude, so that value is
  exactly code 0 (``-8 d``) and every other value lies inside the code range.
* ``min_max_q4_0_with_embeddings``: the same, plus the weights of every ``nn.Embedding``.
* ``min_max_q4_0_with_embeddings_99``: the same weights, with percentile calibration:
  ``m`` is the 0.99 quantile of the block's magnitudes (numpy's linear interpolation
  over its 32 values), signed like the block's value of largest magnitude. The rare
  outlier above it is clamped to the extreme code, and the other 31 values get a finer
  step than min-max gives them.

Codes are always the nearest to ``value / d`` for the stored (f16) scale, clamped to
0..15. Torch-free: :func:`t2n.quantize` applies them.
"""

from __future__ import annotations

import attrs

from t2n.errors import InvalidArgumentError


@attrs.frozen
class Q40Recipe:
    """A Q4_0 recipe: its name, whether embeddings are quantized too, and the quantile
    of a block's magnitudes its scale is taken from (1.0: the maximum)."""

    name: str
    embeddings: bool = False
    percentile: float = 1.0

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.percentile, float) or not 0.5 <= self.percentile <= 1.0:
            raise InvalidArgumentError(
                f"recipe {self.name!r}: percentile must be a float in [0.5, 1.0], got {self.percentile!r}")


RECIPES: dict[str, Q40Recipe] = {
    r.name: r for r in (
        Q40Recipe("min_max_q4_0"),
        Q40Recipe("min_max_q4_0_with_embeddings", embeddings=True),
        Q40Recipe("min_max_q4_0_with_embeddings_99", embeddings=True, percentile=0.99),
    )
}


def recipe_of(value: object) -> Q40Recipe:
    """The recipe named ``value`` (or ``value`` itself when it is a :class:`Q40Recipe`)."""
    if isinstance(value, Q40Recipe):
        return value
    if isinstance(value, str) and value in RECIPES:
        return RECIPES[value]
    raise InvalidArgumentError(
        f"unknown quantization recipe {value!r}; use one of {sorted(RECIPES)} or a t2n.Q40Recipe")


__all__ = ["RECIPES", "Q40Recipe", "recipe_of"]
