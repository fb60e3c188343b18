"""``TractNNEF``: tract's NNEF dialect, with tract extensions gated by the version."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Self

import attrs
import numpy as np

from t2n.backends.nnef.context import Emitter, EmitterSet
from t2n.backends.nnef.extensions import check_custom_extensions
from t2n.backends.nnef.renderer import common_emitters
from t2n.backends.target import (
    Target,
    check_io_flag,
    emitter_field,
    fragment_field,
    parse_version,
    version_text,
)
from t2n.backends.tract.environments import run_in_tract_version, uses_environment
from t2n.backends.tract.passes import (
    DeboxUpsample,
    DynamicAxisSort,
    FuseMoeRouter,
    GruSequence,
    NearestAsDeconv,
    NearestUpsample,
    ReifySdpa,
    UntieProductWeights,
)
from t2n.backends.tract.properties import checked_properties, identity_properties
from t2n.backends.tract.renderer import TractRenderer
from t2n.backends.tract.versions import NATIVE_OPS, target_has
from t2n.check.compare import Tolerance
from t2n.check.engines import run_tract
from t2n.errors import InvalidArgumentError
from t2n.ir import DType
from t2n.ir.dtypes import bf16_export_dtype
from t2n.ir.identifiers import TRACT_IDENTIFIERS, IdentifierRules
from t2n.passes.base import Pass
from t2n.passes.dynamic_axes import dynamic_axes_form
from t2n.passes.expand_moe import ExpandMoeExperts
from t2n.passes.precision import (
    ForceAttentionInnerInF32,
    ForceLinearAccumulationInF32,
    ForceNormInF32,
)


def _axes(value: object) -> Mapping[str, Mapping[int, str]] | None:
    return dynamic_axes_form(value, "TractNNEF(dynamic_axes=...)") or None


def _tract_version(value: object) -> str:
    return version_text(value, "TractNNEF version")


def _flag(name: str, default: bool = False) -> Any:
    def check(value: object) -> bool:
        if not isinstance(value, bool):
            raise InvalidArgumentError(f"TractNNEF({name}=...) must be True or False, got {value!r}")
        return value

    return attrs.field(default=default, kw_only=True, converter=check)


RECURRENT_KERNELS = ("auto", "fused", "loop")
"""The forms of an LSTM or GRU step ``TractNNEF(recurrent_kernels=...)`` takes."""


def _recurrent_kernels(value: object) -> str:
    if value not in RECURRENT_KERNELS:
        raise InvalidArgumentError(f"TractNNEF(recurrent_kernels=...) is one of {', '.join(RECURRENT_KERNELS)}, "
                                   f"got {value!r}")
    return str(value)


def _tolerance(value: object) -> Tolerance:
    return Tolerance.parse(value)


TRACT_FEATURE_FLAGS = frozenset({"default", "complex"})
"""tract's feature flags a target may name (t2n emits no complex-number ops, so
``complex`` changes nothing in what it writes)."""


def _feature_flags(value: object) -> frozenset[str]:
    if value is None:
        return frozenset()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (set, frozenset, list, tuple)):
        raise InvalidArgumentError(f"TractNNEF(feature_flags=...) must be a set of flag names, got {value!r}")
    names: set[Any] = {getattr(f, "value", f) for f in items}
    unknown = sorted(map(repr, names - TRACT_FEATURE_FLAGS))
    if unknown:
        raise InvalidArgumentError(
            f"TractNNEF(feature_flags=...): unknown flag(s) {', '.join(unknown)}; "
            f"tract's flags are {', '.join(sorted(TRACT_FEATURE_FLAGS))}"
        )
    return frozenset(str(n) for n in names)


@functools.cache
def tract_emitters() -> dict[str, Emitter]:
    """tract's own emitters: the ``TRACT`` table of every module of ``t2n.backends.tract.emit``."""
    return EmitterSet.collected("t2n.backends.tract.emit", "TRACT")

TRACT_LATEST = "0.23.9"
"""The newest tract version t2n emits for and tests against (``TractNNEF.latest()``)."""


def _extensions(value: object) -> tuple[str, ...]:
    return check_custom_extensions(value, allowed=True, where="TractNNEF(custom_extensions=...)")


@attrs.frozen
class TractNNEF(Target):
    """tract's NNEF dialect, with tract extensions gated by ``version``.

    ``version`` is text (``"0.23.9"``), a tuple of ints or a parsed version object
    (major, minor and patch or micro); it is kept as text.
    ``dynamic_axes`` is ``{input_name: {axis: symbol}}`` (like ONNX export);
    ``custom_extensions`` are extra ``extension`` lines such as ``"tract_assert S >= 1"``.

    ``check_io``: run the artifact in tract after export and compare with PyTorch at
    ``check_io_tolerance`` (a ``t2n.Tolerance`` or its name, tract's names included).
    ``None`` lets the entry point decide (``compile``/``export``: no,
    ``export_model_to_nnef``: yes); a ``check_io`` given to the call wins.
    ``specific_properties`` are written as tract properties; ``dump_identity_properties``
    adds host, user, OS, Python, date and command line (off by default: they make every
    export differ). ``feature_flags``: tract feature names (``"default"``, ``"complex"``).
    ``reify_sdpa_operator``: scaled dot-product attention as one
    ``tract_transformers_sdpa`` op (tract 0.22 and newer; older versions keep the
    decomposed form). ``upsample_with_debox``: integer-factor nearest upsampling as
    ``debox`` (tract 0.23 and newer). ``recurrent_kernels``: how LSTM and GRU steps are
    written: ``"auto"`` by the measured rule (:func:`~t2n.backends.tract.emit.rnn.fused_pays`),
    ``"fused"`` always tract's own kernels (the ONNX path's form: loads fastest, runs as
    the ONNX path does), ``"loop"`` always standard operations in the loop (runs up to
    1.4x faster on large steps over long sequences, loads 3-8x slower).
    ``copy_shared_product_weights`` (on by default): a matrix product whose weight (over
    4 MiB) other ops read too, such as an output projection tied to the embedding, reads
    a transposed copy of its own, which tract packs once at load instead of at every call
    (:mod:`t2n.backends.tract.passes.product_weights`); off, the artifact is smaller by
    that weight and the product slower.
    """

    version: str = attrs.field(default=TRACT_LATEST, converter=_tract_version)
    bf16_as: DType = attrs.field(default=DType.F16, converter=bf16_export_dtype)
    dynamic_axes: Mapping[str, Mapping[int, str]] | None = attrs.field(default=None, converter=_axes)
    custom_extensions: Sequence[str] = attrs.field(default=(), converter=_extensions)
    emitters: Mapping[str, Emitter] = emitter_field()
    fragments: Mapping[str, str] = fragment_field()
    check_io: bool | None = attrs.field(default=None, kw_only=True, converter=check_io_flag)
    check_io_tolerance: Tolerance = attrs.field(default=Tolerance.APPROXIMATE, kw_only=True, converter=_tolerance)
    specific_properties: Mapping[str, str] = attrs.field(
        default=None, kw_only=True, converter=checked_properties, hash=False)
    dump_identity_properties: bool = _flag("dump_identity_properties")
    feature_flags: frozenset[str] = attrs.field(default=None, kw_only=True, converter=_feature_flags)
    reify_sdpa_operator: bool = _flag("reify_sdpa_operator")
    upsample_with_debox: bool = _flag("upsample_with_debox")
    copy_shared_product_weights: bool = _flag("copy_shared_product_weights", default=True)
    recurrent_kernels: str = attrs.field(default="auto", kw_only=True, converter=_recurrent_kernels)
    # f32-forcing (t2n.passes.precision): parts of an f16 model computed in f32
    force_attention_inner_in_f32: bool = _flag("force_attention_inner_in_f32")
    force_linear_accumulation_in_f32: bool = _flag("force_linear_accumulation_in_f32")
    force_norm_in_f32: bool = _flag("force_norm_in_f32")

    name: ClassVar[str] = "tract"
    supports_symbols: ClassVar[bool] = True
    accepts_extension_lines: ClassVar[bool] = True
    reads_archives: ClassVar[bool] = True
    casts_set_precision: ClassVar[bool] = True
    identifier_rules: ClassVar[IdentifierRules] = TRACT_IDENTIFIERS

    def __attrs_post_init__(self) -> None:
        if parse_version(self.version, "TractNNEF version") < (0, 19, 0):
            raise InvalidArgumentError(f"t2n emits for tract 0.19 and newer, not {self.version}")

    @classmethod
    def latest(cls, **options: Any) -> Self:
        """The newest tract t2n emits for (``TRACT_LATEST``), with ``options``."""
        return cls(TRACT_LATEST, **options)

    def extra_properties(self) -> Mapping[str, str]:
        """``specific_properties``, and the identity ones when asked."""
        if not self.dump_identity_properties:
            return self.specific_properties
        return {**identity_properties(), **self.specific_properties}

    def builtin_emitters(self) -> Mapping[str, Emitter]:
        return {**common_emitters(), **tract_emitters()}

    def native_ops(self) -> frozenset[str]:
        """``cumsum`` as ``tract_core_cumsum`` where this version has it (:data:`NATIVE_OPS`)."""
        return frozenset(op for op, tract_op in NATIVE_OPS.items() if target_has(self, tract_op))

    def passes(self) -> list[Pass]:
        """tract's own forms this target's options ask for, where its version has the op:
        reified SDPA (0.22+), debox upsampling (0.23+); always, where they are faster:
        nearest upsampling as tract's own ``nearest_upsample`` and GRU directions as
        ``tract_core_gru_seq`` projecting their input (0.23.9+), nearest upsampling as a
        ones-kernel deconv (0.23.0-0.23.8); a sort of a dynamic axis as comparisons (tract's
        top-k cannot run it). Mixture-of-experts blocks are written earlier
        (:meth:`lowering_passes`)."""
        out: list[Pass] = []
        if self.reify_sdpa_operator and self.at_least("0.22.0"):
            out.append(ReifySdpa())
        if self.upsample_with_debox and self.at_least("0.23.0"):
            out.append(DeboxUpsample())
        if self.at_least("0.23.9"):
            out.append(NearestUpsample())  # why: backends/tract/passes/nearest_upsample.py
            out.append(GruSequence(self.recurrent_kernels))  # why: backends/tract/passes/gru_sequence.py
        elif self.at_least("0.23.0"):
            out.append(NearestAsDeconv())
        if self.copy_shared_product_weights:
            out.append(UntieProductWeights())  # why: backends/tract/passes/product_weights.py
        out.append(DynamicAxisSort())  # why: backends/tract/passes/dynamic_sort.py
        return out

    def lowering_passes(self) -> list[Pass]:
        """Mixture-of-experts blocks as ``tract_moe_ffn`` (0.23.9+, where it computes the
        block's router), every other block's experts in standard operations; before the
        f32-forcing passes, so forced linear accumulation reaches the experts' products."""
        fused: list[Pass] = [FuseMoeRouter()] if target_has(self, "tract_moe_ffn") else []
        return [*fused, ExpandMoeExperts()]

    def forced_f32_passes(self) -> list[str]:
        """The ``force_*_in_f32`` options that are on, as pass names (:mod:`t2n.passes.precision`)."""
        asked = {ForceAttentionInnerInF32.name: self.force_attention_inner_in_f32,
                 ForceLinearAccumulationInF32.name: self.force_linear_accumulation_in_f32,
                 ForceNormInF32.name: self.force_norm_in_f32}
        return [name for name, on in asked.items() if on]

    def renderer(self) -> TractRenderer:
        return TractRenderer(self, self.emitter_table(), self.refusals())

    def run(self, path: Path, inputs: Sequence[np.ndarray], *, registries: Sequence[str] = (),
            symbols: Mapping[str, int] | None = None) -> list[np.ndarray]:
        """Run in tract's Python package, in a worker process (a crash in tract is an
        ``EngineCrashedError``, not the end of this process). With
        ``T2N_TRACT_ENVIRONMENTS=1``, a version other than the installed one runs in that
        version's own environment (:mod:`t2n.backends.tract.environments`)."""
        if uses_environment(self.version):
            return run_in_tract_version(self.version, str(path), inputs, registries=registries, symbols=symbols)

        return run_tract(str(path), inputs, registries=registries, symbols=symbols).outputs

    @property
    def engine(self) -> str:
        return f"tract {self.version}"
