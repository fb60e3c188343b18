"""The oldest tract release that loads each operation t2n writes, in one table.

Emitters ask :func:`tract_has` before writing an operation that not every supported tract
version knows, and write the decomposed form (standard operations) otherwise, so that an
artifact made for ``TractNNEF(version)`` loads in that version. ``docs/operators.md``
shows this table (``tools.operator_table``).

The bounds were found by loading one-operation graphs and whole models in the tract
Python wheels (0.20.22; 0.21.0, .5, .6, .7, .8, .10, .19; 0.22.4; 0.23.0, .1, .3, .5 to .9):
"since" is the first of those releases that loads the operation and gives PyTorch's
numbers. An operation without an entry did so in every one of them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

import attrs

from t2n.backends.nnef.context import EmitContext, RenderTarget
from t2n.backends.target import parse_version
from t2n.errors import OpProblem

AVG_POOL_CONSTANT_BORDER = "avg_pool with border = 'constant' (padding in the divisor)"
F64_ABS = "abs on f64 tensors"
INT_SIGN = "sign on integer tensors"
INT_DIV_BY_CONSTANT = "div of integers by a constant, rounding towards zero"
SCATTER_REDUCTION = "tract_core_scatter_elements/scatter_nd with a reduction"


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
    Requirement(AVG_POOL_CONSTANT_BORDER, "0.23.6",
                "an explicit zero pad, then avg_pool without padding (older tract leaves the padding out of the divisor)"),
    Requirement(F64_ABS, "0.23.9", "select(x < 0, -x, x)"),
    Requirement(INT_SIGN, "0.23.5", "(x > 0) - (x < 0), cast to the integer type"),
    Requirement(INT_DIV_BY_CONSTANT, "0.23.9",
                "the magnitude divided, then the sign restored (older tract rounds negatives down)"),
    Requirement(SCATTER_REDUCTION, "0.23.0",
                "none: the export is refused (older tract ignores the reduction and overwrites)"),
    Requirement("tract_core_grid_sample", "0.23.3", "none: the export is refused"),
    Requirement("tract_core_lstm_epilogue", "0.23.3", "the LSTM gates in standard operations"),
    Requirement("tract_core_gru_seq", "0.23.9", "a tract_core_scan loop over the GRU cell in standard operations"),
    Requirement("tract_core_cumsum", "0.23.9",
                "triangular matmuls in blocks of about sqrt(n) (static sizes), else a tract_core_scan loop"),
    Requirement("tract_core_topk", "0.20.0", "none: the export is refused"),
    # From tract's sources (the transformers registry: apply_rope since 0.22.0, the
    # NNEF form of dyn_kv_cache since 0.23.0); checked by loading in 0.23.9.
    Requirement("tract_transformers_apply_rope", "0.22.0", "x * cos + rotate_half(x) * sin in standard operations"),
    Requirement("tract_transformers_dyn_kv_cache", "0.23.0",
                "none: the export is refused (the explicit cache inputs and outputs load in every version)"),
    Requirement("tract_transformers_window_kv_sdpa", "0.23.1",
                "none: the export is refused (the stateful cache without windows loads from 0.23.0)"),
    Requirement("tract_transformers_quantized_dyn_kv_cache", "0.23.5",
                "none: the export is refused (kv_cache='stateful' keeps the model's dtype)"),
    Requirement("tract_transformers_gdn_recurrent", "0.23.5",
                "a tract_core_scan loop over the gated delta rule in standard operations"),
    Requirement("extension tract_assert", "0.21.6", "no assertion line (S >= 1 is not stated)"),
    Requirement("symbol as an operand (tract_core_cast(S), tract_core_range(0, S, 1))", "0.21.5",
                "none: the export is refused (a dynamic axis used only by shape-preserving ops is fine)"),
)})
"""Operation (or syntax) → the oldest tract release that loads it."""

TRACT_ASSERT = "extension tract_assert"

NATIVE_OPS: Mapping[str, str] = MappingProxyType({"cumsum": "tract_core_cumsum"})
"""IR ops the frontend writes as one op when the target runs them natively (else their
decomposition) → the tract operation that runs them."""


def min_tract_version(name: str) -> str | None:
    """The oldest tract that loads operation ``name``; None when every version does."""
    req = TRACT_REQUIREMENTS.get(name)
    return req.since if req is not None else None


def target_has(target: RenderTarget, name: str) -> bool:
    """Whether ``target`` (a tract version) loads operation ``name``."""
    since = min_tract_version(name)
    return since is None or target.at_least(since)


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


SYMBOLIC_RESHAPE_BROKEN = frozenset({(0, 21, 6), (0, 21, 7)})
"""tract releases that refuse ``reshape(x, shape = [S, 32])`` ("Converting argument
shape"): t2n refuses dynamic axes for them."""

SYMBOL_EXPRESSIONS = "symbol as an operand (tract_core_cast(S), tract_core_range(0, S, 1))"

_LISTS = re.compile(r"\[[^\[\]]*\]")
_ATTRIBUTES = re.compile(r"\b\w+ = [^,()]+")


def operand_text(line: str) -> str:
    """A body line without its attribute values and lists (where symbols are fine)."""
    while _LISTS.search(line):
        line = _LISTS.sub("", line)
    return _ATTRIBUTES.sub("", line)


def symbol_use_problems(target: RenderTarget, graph_nnef: str, symbols: list[str]) -> list[OpProblem]:
    """Where the graph body passes a symbol as an operand (a range to ``S``, a cast of
    ``S``) for a tract that resolves symbols only in shapes and attributes: one problem
    per symbol, naming the first such line."""
    if symbols and parse_version(target.version) in SYMBOLIC_RESHAPE_BROKEN:
        return [OpProblem(
            "dynamic axis", "", "",
            f"tract {target.version} cannot load a reshape to a symbolic shape (sizes "
            f"{', '.join(symbols)}); export with TractNNEF('0.21.8') or newer, or without dynamic axes")]
    if not symbols or target_has(target, SYMBOL_EXPRESSIONS):
        return []

    body = graph_nnef[graph_nnef.find("\ngraph "):]
    problems = []
    for sym in symbols:
        word = re.compile(rf"\b{re.escape(sym)}\b")
        used = [line.strip() for line in body.splitlines()[1:]
                if word.search(operand_text(line))]
        if used:
            problems.append(OpProblem(
                "dynamic axis", "", "",
                f"the size '{sym}' is an operand in '{used[0]}', and tract {target.version} reads "
                f"symbols only in shapes and attributes (tract {min_tract_version(SYMBOL_EXPRESSIONS)} "
                f"and newer compute with them); export with TractNNEF('{min_tract_version(SYMBOL_EXPRESSIONS)}') or newer, "
                "or without this dynamic axis"))
    return problems
