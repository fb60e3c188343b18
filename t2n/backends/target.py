"""Targets: what to export for. Each names its renderer and the options it honours."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

import attrs

from t2n.errors import InvalidArgumentError
from t2n.ir import DType

if TYPE_CHECKING:
    from t2n.backends.nnef.renderer import NNEFRenderer


_VERSION = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?\Z")


def parse_version(text: object, what: str = "version") -> tuple[int, ...]:
    """``"0.23.9"`` → ``(0, 23, 9)``; ``"0.21"`` → ``(0, 21, 0)``. Anything else (a float,
    trailing text, a negative or empty version) is an :class:`InvalidArgumentError`:
    a float cannot say ``0.20`` from ``0.2``, and ``"0.21.x"`` has no meaning to gate on."""
    if not isinstance(text, str):
        hint = f" (write it as the string {str(text)!r}" + (", since 0.20 and 0.2 are the same float)" if isinstance(text, float) else ")")
        raise InvalidArgumentError(f"{what} must be a string such as '0.23.9', got {type(text).__name__} {text!r}{hint}")
    m = _VERSION.match(text.strip())
    if not m:
        raise InvalidArgumentError(
            f"cannot read {what} {text!r}: write it as MAJOR.MINOR or MAJOR.MINOR.PATCH with "
            "non-negative integers, like '0.23.9'"
        )
    return tuple(int(g) for g in m.groups(default="0"))


def _bf16(value: object) -> DType:
    dt = DType.parse(value) if isinstance(value, str) else value
    if dt not in (DType.F16, DType.F32):
        raise InvalidArgumentError(f"bf16 tensors can be exported as f16 or f32, not {value!r}")
    assert isinstance(dt, DType)
    return dt


class Target:
    """Base of export targets. ``version`` gates which ops may be used; ``bf16_as``
    is the type bf16 weights and activations are exported as (neither format has bf16)."""

    version: str
    bf16_as: DType

    name: ClassVar[str] = ""
    supports_symbols: ClassVar[bool] = False

    @property
    def version_tuple(self) -> tuple[int, ...]:
        return parse_version(self.version)

    def at_least(self, version: str) -> bool:
        return self.version_tuple >= parse_version(version)

    def renderer(self) -> NNEFRenderer:
        raise NotImplementedError

    def __str__(self) -> str:
        return f"{type(self).__name__}({self.version!r})"


def _axes(value: object) -> Mapping[str, Mapping[int, str]] | None:
    from t2n.passes.dynamic_axes import dynamic_axes_form

    return dynamic_axes_form(value, "TractNNEF(dynamic_axes=...)") or None


def _extensions(value: object) -> tuple[str, ...]:
    from t2n.backends.nnef.extensions import check_custom_extensions

    return check_custom_extensions(value, tract=True, where="TractNNEF(custom_extensions=...)")


@attrs.frozen
class TractNNEF(Target):
    """tract's NNEF dialect, with tract extensions gated by ``version``.

    ``dynamic_axes`` is ``{input_name: {axis: symbol}}`` (like ONNX export);
    ``custom_extensions`` are extra ``extension`` lines such as ``"tract_assert S >= 1"``.
    """

    version: str = "0.23.9"
    bf16_as: DType = attrs.field(default=DType.F16, converter=_bf16)
    dynamic_axes: Mapping[str, Mapping[int, str]] | None = attrs.field(default=None, converter=_axes)
    custom_extensions: Sequence[str] = attrs.field(default=(), converter=_extensions)

    name: ClassVar[str] = "tract"
    supports_symbols: ClassVar[bool] = True

    def __attrs_post_init__(self) -> None:
        if parse_version(self.version, "TractNNEF version") < (0, 19, 0):
            raise InvalidArgumentError(f"t2n emits for tract 0.19 and newer, not {self.version}")

    def renderer(self) -> NNEFRenderer:
        from t2n.backends.nnef.renderer import tract_renderer

        return tract_renderer(self)


KHRONOS_VERSIONS = ((1, 0, 5),)
"""The NNEF versions KhronosNNEF emits: t2n uses 1.0.5's operations."""


@attrs.frozen
class KhronosNNEF(Target):
    """Strict Khronos NNEF (1.0.x): standard operations only, static shapes."""

    version: str = "1.0.5"
    bf16_as: DType = attrs.field(default=DType.F32, converter=_bf16)

    name: ClassVar[str] = "khronos"

    def __attrs_post_init__(self) -> None:
        if parse_version(self.version, "KhronosNNEF version") not in KHRONOS_VERSIONS:
            raise InvalidArgumentError(
                f"KhronosNNEF supports NNEF 1.0.5 (the version the Khronos parser and "
                f"nnef-tools implement), not {self.version!r}; use KhronosNNEF('1.0.5')"
            )

    def renderer(self) -> NNEFRenderer:
        from t2n.backends.nnef.renderer import khronos_renderer

        return khronos_renderer(self)
