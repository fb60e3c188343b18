"""How the ``check_io`` settings of a target, an entry point and a call combine.

``check_io`` given to the call (``compile``/``export``) wins; else the target's own
``check_io`` (``TractNNEF(check_io=True)``); else the entry point's default: ``compile``
and ``export`` do not run the engine, ``export_model_to_nnef`` does. The tolerance
follows the same order: the call's ``tolerance``, else the target's
``check_io_tolerance``, else ``approximate``.
"""

from __future__ import annotations

from t2n.backends.target import Target
from t2n.check.compare import Tolerance
from t2n.errors import InvalidArgumentError


def resolve_check(target: Target, check_io: object, tolerance: object,
                  *, default: bool) -> tuple[bool, Tolerance]:
    """(whether to run the engine, at which tolerance) for a call on ``target``."""
    own = getattr(target, "check_io", None)
    if check_io is None:
        check_io = own if own is not None else default
    if not isinstance(check_io, bool):
        raise InvalidArgumentError(f"check_io must be True or False (or None: the target decides), got {check_io!r}")
    if tolerance is None:
        tolerance = getattr(target, "check_io_tolerance", None) or Tolerance.APPROXIMATE
    return check_io, Tolerance.parse(tolerance)
