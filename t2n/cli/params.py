"""Option value types of the ``t2n`` command: each refuses a malformed value as a usage
error (exit status 2) that quotes the value and shows the expected form."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
import click

if TYPE_CHECKING:
    _ParamType = click.ParamType[Any]
else:  # click before 8.2 has no type parameter on ParamType
    _ParamType = click.ParamType

_F = TypeVar("_F", bound=Callable[..., Any])

_SYMBOL = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

DTYPES = ("float32", "float16", "bfloat16", "float64", "int64", "int32", "int16", "int8",
          "uint8", "bool")
"""The dtypes ``--input-dtype`` accepts (torch's names)."""


@attrs.frozen
class DynamicAxis:
    """``--dynamic-axis inp:1:S``: axis 1 of input ``inp`` is the symbol ``S``."""

    input: str
    axis: int
    symbol: str


class DynamicAxisType(_ParamType):
    name = "INPUT:AXIS:SYMBOL"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> DynamicAxis:
        if isinstance(value, DynamicAxis):
            return value
        parts = str(value).split(":")
        form = ("write it as INPUT:AXIS:SYMBOL, e.g. 'inp:1:S' (axis 1 of input 'inp' is the "
                "symbol S; AXIS an integer, SYMBOL a letter then letters, digits or _)")
        if len(parts) != 3:
            self.fail(f"{value!r} has {len(parts)} part(s) separated by ':', not 3: {form}", param, ctx)
        name, axis, symbol = (p.strip() for p in parts)
        if not _NAME.match(name):
            self.fail(f"{value!r}: input name {name!r} is not an NNEF identifier: {form}", param, ctx)
        if not re.fullmatch(r"-?\d+", axis):
            self.fail(f"{value!r}: axis {axis!r} is not an integer: {form}", param, ctx)
        if not _SYMBOL.match(symbol):
            self.fail(f"{value!r}: symbol {symbol!r} is not a valid symbol: {form}", param, ctx)
        return DynamicAxis(name, int(axis), symbol)


def dynamic_axes_mapping(axes: tuple[DynamicAxis, ...], param: str = "--dynamic-axis") -> dict[str, dict[int, str]]:
    """``compile(dynamic_axes=...)`` from repeated ``--dynamic-axis`` values; one axis
    given two symbols is a usage error."""
    out: dict[str, dict[int, str]] = {}
    for a in axes:
        prev = out.setdefault(a.input, {}).get(a.axis)
        if prev is not None and prev != a.symbol:
            raise click.BadParameter(
                f"axis {a.axis} of input {a.input!r} is given two symbols, {prev!r} and "
                f"{a.symbol!r}; give each axis once", param_hint=param)
        out[a.input][a.axis] = a.symbol
    return out


class ShapeType(_ParamType):
    """``--input-shape 1,3,224,224`` (or ``1x3x224x224``; ``""`` for a scalar)."""

    name = "D0,D1,..."

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> tuple[int, ...]:
        if isinstance(value, tuple):
            return value
        text = str(value).strip()
        if text in ("", "()", "[]"):
            return ()
        parts = re.split(r"[,x×]", text.strip("()[] "))
        if not all(re.fullmatch(r"\s*\d+\s*", p) for p in parts):
            self.fail(f"{value!r} is not a shape: write the sizes as non-negative integers "
                      "separated by commas, e.g. '1,3,224,224' (one --input-shape per input, "
                      "in order; use --dynamic-axis for sizes that vary)", param, ctx)
        return tuple(int(p) for p in parts)


class KeyValueType(_ParamType):
    """``NAME=VALUE`` (``--factory-arg``, ``--symbol``)."""

    name = "NAME=VALUE"

    def __init__(self, integer: bool = False) -> None:
        self.integer = integer

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> tuple[str, Any]:
        if isinstance(value, tuple):
            return value
        key, sep, val = str(value).partition("=")
        key = key.strip()
        if not sep or not _NAME.match(key):
            self.fail(f"{value!r} is not NAME=VALUE (NAME a Python identifier), e.g. 'S=10'", param, ctx)
        if self.integer:
            if not re.fullmatch(r"\s*\d+\s*", val):
                self.fail(f"{value!r}: {val!r} is not a non-negative integer", param, ctx)
            return key, int(val)
        return key, val


def key_values(pairs: tuple[tuple[str, Any], ...], param: str) -> dict[str, Any]:
    """A dict from repeated NAME=VALUE options; a name given twice is a usage error."""
    out: dict[str, Any] = {}
    for key, val in pairs:
        if key in out:
            raise click.BadParameter(f"{key!r} is given twice", param_hint=param)
        out[key] = val
    return out


def tolerance_option(default: str = "approximate") -> Callable[[_F], _F]:
    """``--tolerance``: the named tolerances of ``Artifact.check``."""
    return click.option(
        "--tolerance", type=click.Choice(["exact", "approximate", "loose", "very_loose"], case_sensitive=False),
        default=default, show_default=True,
        help="How close the engine's outputs must be: exact, approximate (atol 1e-4 / rtol 5e-4 "
             "in f32, 1e-3 / 5e-3 in f16), loose, very_loose.")


def version_callback(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Refuse a malformed version as a usage error (with t2n's own version reader)."""
    if value is None:
        return None
    from t2n.backends.target import parse_version
    from t2n.errors import InvalidArgumentError

    try:
        parse_version(value, param.name or "version")
    except InvalidArgumentError as exc:
        raise click.BadParameter(str(exc), ctx, param) from exc
    return value
