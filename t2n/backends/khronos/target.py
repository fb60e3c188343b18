"""``KhronosNNEF``: strict Khronos NNEF 1.0.5, standard operations only."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Self

import attrs
import numpy as np

from t2n.backends.khronos.refusals import REFUSALS
from t2n.backends.khronos.renderer import KhronosRenderer
from t2n.backends.nnef.context import Emitter, EmitterSet
from t2n.backends.nnef.renderer import common_emitters
from t2n.backends.target import (
    Target,
    check_io_flag,
    emitter_field,
    fragment_field,
    parse_version,
    version_text,
)
from t2n.check.engines import run_khronos
from t2n.errors import InvalidArgumentError
from t2n.ir import DType
from t2n.ir.dtypes import bf16_export_dtype
from t2n.passes.base import Pass
from t2n.passes.expand_moe import ExpandMoeExperts


def _version(value: object) -> str:
    return version_text(value, "KhronosNNEF version")


@functools.cache
def khronos_emitters() -> dict[str, Emitter]:
    """Khronos NNEF's own emitters: the ``KHRONOS`` table of every module of
    ``t2n.backends.khronos.emit``."""
    return EmitterSet.collected("t2n.backends.khronos.emit", "KHRONOS")

KHRONOS_VERSIONS = ((1, 0, 5),)
"""The NNEF versions KhronosNNEF emits: t2n uses 1.0.5's operations."""


@attrs.frozen
class KhronosNNEF(Target):
    """Strict Khronos NNEF (1.0.x): standard operations only, static shapes.

    ``check_io`` as for :class:`TractNNEF` (checked in the nnef-tools interpreter)."""

    version: str = attrs.field(default="1.0.5", converter=_version)
    check_io: bool | None = attrs.field(default=None, converter=check_io_flag)
    bf16_as: DType = attrs.field(default=DType.F32, converter=bf16_export_dtype, kw_only=True)
    emitters: Mapping[str, Emitter] = emitter_field()
    fragments: Mapping[str, str] = fragment_field()

    name: ClassVar[str] = "khronos"
    allows_same_io_names: ClassVar[bool] = False
    """The Khronos parser refuses a graph whose result is also a parameter."""

    def __attrs_post_init__(self) -> None:
        if parse_version(self.version, "KhronosNNEF version") not in KHRONOS_VERSIONS:
            raise InvalidArgumentError(
                f"KhronosNNEF supports NNEF 1.0.5 (the version the Khronos parser and "
                f"nnef-tools implement), not {self.version!r}; use KhronosNNEF('1.0.5')"
            )

    @classmethod
    def latest(cls, **options: Any) -> Self:
        """The newest NNEF version t2n emits (1.0.5), with ``options``."""
        return cls("1.0.5", **options)

    def builtin_emitters(self) -> Mapping[str, Emitter]:
        return {**common_emitters(), **khronos_emitters()}

    def refusals(self) -> Mapping[str, str]:
        return REFUSALS

    def lowering_passes(self) -> list[Pass]:
        """Mixture-of-experts experts in standard operations."""
        return [ExpandMoeExperts()]

    def renderer(self) -> KhronosRenderer:
        return KhronosRenderer(self, self.emitter_table(), self.refusals())

    def run(self, path: Path, inputs: Sequence[np.ndarray], *, registries: Sequence[str] = (),
            symbols: Mapping[str, int] | None = None) -> list[np.ndarray]:
        """Parse with the Khronos ``nnef`` parser and run in the nnef-tools PyTorch
        interpreter (a folder; Khronos NNEF has no symbols or registries), with their
        default options; only fragments the user added to this target are lowered."""
        return run_khronos(str(path), inputs, lowered=sorted(self.fragments)).outputs

    @property
    def engine(self) -> str:
        return "Khronos NNEF interpreter"
