"""The oldest tract release that loads each operation t2n writes, in one table.

Emitters ask :func:`tract_has` before writing an operation that not every supported tract
version knows, and write the decomposed form (standard operations) otherwise, so that an
artifact made for ``TractNNEF(version)`` loads in that version. ``docs/operators.md``
shows this table (``t2n.frontend.coverage``).

The bounds were found by loading one-operation graphs in the tract Python wheels of each
release line (0.21.19, 0.22.4, 0.23.9) and from tract's source history; an operation
without an entry loads in every version t2n emits for (0.19 and newer).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from t2n.backends.nnef.context import EmitContext
    from t2n.backends.target import Target


@attrs.frozen
class Requirement:
    """The oldest tract that loads ``name``, and what t2n writes for older targets."""

    name: str
    since: str
    older: str


TRACT_REQUIREMENTS: Mapping[str, Requirement] = MappingProxyType({r.name: r for r in (
    Requirement("copy", "0.23.0", "the identifier itself (`y = x;`)"),
    Requirement("any_reduce", "0.23.0", "gt(max_reduce(tract_core_cast(x, to = \"f32\")), 0.0)"),
    Requirement("all_reduce", "0.23.0", "eq(min_reduce(tract_core_cast(x, to = \"f32\")), 1.0)"),
    Requirement("tract_core_silu", "0.23.0", "x * sigmoid(x)"),
    Requirement("tract_core_gelu_approx", "0.23.0", "the tanh formula in standard operations"),
    Requirement("tract_core_rms_norm", "0.23.0", "x * rsqrt(mean_reduce(x * x) + eps)"),
    Requirement("tract_core_is_inf", "0.23.0", "x == x and x - x != x - x"),
    Requirement("tract_core_is_nan", "0.23.0", "x != x"),
    Requirement("slice of a static axis to a symbolic end", "0.23.0",
                "tract_core_dyn_slice with the symbolic length"),
    Requirement("range of i64 bounds sliced to its symbolic length", "0.23.0",
                "tract_core_range of dimension literals (length S), cast to i64"),
    Requirement("tract_core_grid_sample", "0.23.3", "none: the export is refused"),
    Requirement("tract_core_topk", "0.20.0", "none: the export is refused"),
)})
"""Operation (or syntax) → the oldest tract release that loads it."""


def min_tract_version(name: str) -> str | None:
    """The oldest tract that loads operation ``name``; None when every version does."""
    req = TRACT_REQUIREMENTS.get(name)
    return req.since if req is not None else None


def target_has(target: Target, name: str) -> bool:
    """Whether ``target``'s engine loads operation ``name`` (a target without a tract
    version, such as a user's own, is taken to have everything)."""
    since = min_tract_version(name)
    if since is None:
        return True
    at_least = getattr(target, "at_least", None)
    return bool(at_least(since)) if callable(at_least) else True


def tract_has(ctx: EmitContext, name: str) -> bool:
    """Whether the target of this render loads operation ``name``."""
    return target_has(ctx.target, name)


def require(ctx: EmitContext, name: str, what: str) -> bool:
    """True when the target loads ``name``; else records why the op cannot be exported
    (naming the version that has it) and returns False."""
    if tract_has(ctx, name):
        return True
    ctx.unsupported(
        f"{what} needs tract's {name}, which tract {ctx.target.version} does not have "
        f"(it is in tract {min_tract_version(name)} and newer); export with "
        f"TractNNEF('{min_tract_version(name)}') or newer"
    )
    return False


def version_table_rows() -> list[tuple[str, str, str]]:
    """(operation, oldest tract, what older targets get), for the documentation."""
    rows = sorted(TRACT_REQUIREMENTS.values(), key=lambda r: (tuple(int(p) for p in r.since.split(".")), r.name))
    return [(r.name, r.since, r.older) for r in rows]
