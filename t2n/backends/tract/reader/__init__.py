"""The operations of tract's NNEF dialect that t2n reads back: one module per family,
each with a ``TRACT`` table (:class:`~t2n.backends.nnef.reader.optable.ReadOpTable`)
beside the standard operations of ``t2n.backends.nnef.reader``."""

from __future__ import annotations

import functools

from t2n.backends.nnef.reader.evaluate import common_read_ops
from t2n.backends.nnef.reader.optable import ReadOps, ReadOpTable
from t2n.registry import collect, entries_of


@functools.cache
def tract_read_ops() -> ReadOps:
    """Every operation a tract-dialect document may call: the standard ones and tract's."""
    return common_read_ops().merged(entries_of(collect("t2n.backends.tract.reader", "TRACT", ReadOpTable)))
