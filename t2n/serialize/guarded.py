"""Tensor data that refuses to be written once the weights it came from have changed.

An artifact holds zero-copy views of the model's memory, and passes (batch-norm
folding, constant folding) compute new tensors from it at compile time. If the model
is changed between ``compile`` and ``save`` (``w.mul_(2)``, ``w.data.copy_(...)``,
``load_state_dict``), writing would mix the changed views with tensors computed from
the old values: an artifact that matches neither model. So each tensor of an artifact
is written through :class:`GuardedArrayData`, which checks, just before its bytes are
read (and again after), that the weights it comes from are what ``compile`` saw, and
otherwise raises :class:`~t2n.errors.WeightsChangedError` naming every changed one.

The checks are plain callables (for PyTorch tensors: the version counter and a
fingerprint of a few sampled elements; see :mod:`t2n.frontend.weight_guard`); this
module knows nothing of torch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np

from t2n.errors import WeightsChangedError
from t2n.ir import ArrayData
from t2n.ir.tensor_data import DEFAULT_CHUNK_BYTES, chunks_of
from t2n.serialize.filecheck import ensure_readable

Check = Callable[[], bool]
"""True while a source tensor is unchanged."""

SAMPLES = 64


def fingerprint(arr: np.ndarray) -> bytes:
    """A few elements spread over ``arr`` (and its first and last), read without copying
    the rest: changes that the version counter misses (writes through ``.data`` or
    numpy views) show up here unless they leave every sampled element as it was."""
    if arr.size == 0:
        return b""
    ensure_readable(arr)  # a mapped file cut short is an error, not a SIGBUS
    if arr.ndim == 0:
        return arr.tobytes()
    flat = np.unique(np.linspace(0, arr.size - 1, num=min(SAMPLES, arr.size)).astype(np.int64))
    return np.ascontiguousarray(arr[np.unravel_index(flat, arr.shape)]).tobytes()


class WeightGuards:
    """The weights one artifact was compiled from, by name, with their checks."""

    def __init__(self, checks: Sequence[tuple[str, Check]]) -> None:
        self.checks = list(checks)

    def changed(self) -> list[str]:
        return [name for name, unchanged in self.checks if not unchanged()]

    def verify(self) -> None:
        """Raise :class:`WeightsChangedError` naming every changed weight (if any)."""
        names = self.changed()
        if names:
            shown = ", ".join(f"'{n}'" for n in names[:20]) + (f" and {len(names) - 20} more" if len(names) > 20 else "")
            raise WeightsChangedError(
                f"{len(names)} parameter(s)/buffer(s) of the model were written after compile() "
                f"({shown}); the artifact would mix the compiled weights with the changed ones, "
                "so nothing was written. What to do: compile again after changing the model "
                "(or save before changing it).",
                names,
            )


class GuardedArrayData(ArrayData):
    """:class:`ArrayData` whose reads first check the weights it comes from.

    ``own``: the check of the model tensor whose memory ``array`` views (None for a
    tensor computed at compile time); ``first``: the first tensor an artifact writes,
    whose read checks every weight of the artifact, so a save is refused before any
    tensor is written.
    """

    __slots__ = ("first", "guards", "own")

    def __init__(self, data: ArrayData, guards: WeightGuards, own: Check | None, first: bool) -> None:
        super().__init__(data.array, data.dtype)
        self.guards, self.own, self.first = guards, own, first

    def _check(self) -> None:
        if self.first or (self.own is not None and not self.own()):
            self.guards.verify()

    def raw(self) -> np.ndarray:
        self._check()
        return self.array

    def iter_chunks(self, max_bytes: int = DEFAULT_CHUNK_BYTES) -> Iterator[np.ndarray]:
        self._check()
        yield from chunks_of(self.array, max_bytes)
        if self.own is not None and not self.own():  # changed while it was being written
            self.guards.verify()


__all__ = ["Check", "GuardedArrayData", "WeightGuards", "fingerprint"]
