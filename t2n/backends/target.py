"""Targets: what to export for. Each names its renderer and the options it honours."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Self, cast

import attrs
import numpy as np

from t2n.errors import InvalidArgumentError
from t2n.ir import DType
from t2n.ir.dtypes import bf16_export_dtype
from t2n.ir.identifiers import STANDARD_IDENTIFIERS, TRACT_IDENTIFIERS, IdentifierRules

if TYPE_CHECKING:
    from t2n.backends.nnef.context import Emitter
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


class Target:
    """Base of export targets: what the artifact is written for, how it is rendered
    (:meth:`renderer`, with the emitters of :meth:`emitter_table`) and how it is run
    (:meth:`run`, used by ``Artifact.check``). ``version`` gates which ops may be
    used; ``bf16_as`` is the type bf16 weights and activations are exported as
    (neither format has bf16).

    A new target subclasses one of the built-in ones (or this class) with
    ``@attrs.frozen`` and overrides what differs; emitters and fragments for one
    target are added with :meth:`with_emitters`, which returns a new target.
    """

    version: str
    bf16_as: DType
    emitters: Mapping[str, Emitter] = MappingProxyType({})
    """Emitters added to (or replacing) the built-in ones, by IR op kind."""
    fragments: Mapping[str, str] = MappingProxyType({})
    """NNEF fragment texts added to the built-in ones, by fragment name."""

    name: ClassVar[str] = ""
    supports_symbols: ClassVar[bool] = False
    accepts_extension_lines: ClassVar[bool] = False
    """``custom_extensions`` (tract ``extension`` lines) may be given."""
    reads_archives: ClassVar[bool] = False
    """:meth:`run` loads a ``.tar``/``.tgz`` as it is (else it is given a folder)."""
    identifier_rules: ClassVar[IdentifierRules] = STANDARD_IDENTIFIERS
    """Which names this target's engine reads as identifiers (input/output names,
    and the names emitters make up)."""

    @property
    def version_tuple(self) -> tuple[int, ...]:
        return parse_version(self.version)

    def at_least(self, version: str) -> bool:
        return self.version_tuple >= parse_version(version)

    def renderer(self) -> NNEFRenderer:
        raise NotImplementedError(f"{type(self).__name__} does not say how to render (define renderer())")

    def run(self, path: Path, inputs: Sequence[np.ndarray], *, registries: Sequence[str] = (),
            symbols: Mapping[str, int] | None = None) -> list[np.ndarray]:
        """Run the artifact at ``path`` (a folder, or a ``.tar``/``.tgz`` when
        :attr:`reads_archives`) on ``inputs`` in this target's engine; its outputs.
        ``registries``: the tract registries the graph uses; ``symbols``: values for
        symbolic dimensions."""
        raise NotImplementedError(f"{type(self).__name__} does not say how to run an artifact (define run())")

    @property
    def engine(self) -> str:
        """The engine :meth:`run` uses, as check reports name it."""
        return str(self)

    def builtin_emitters(self) -> Mapping[str, Emitter]:
        """The emitters t2n ships for this target (none for a bare ``Target``)."""
        return {}

    def extra_properties(self) -> Mapping[str, str]:
        """Properties this target adds to the artifact's metadata (none by default)."""
        return {}

    def emitter_table(self) -> dict[str, Emitter]:
        """IR op kind → emitter: the built-in ones, then :attr:`emitters`."""
        return {**self.builtin_emitters(), **self.emitters}

    def fragment_text(self, name: str) -> str:
        """The text of NNEF fragment ``name``: one added to this target, else one of t2n's."""
        if name in self.fragments:
            return self.fragments[name]
        return builtin_fragment(name, str(self))

    def with_emitters(
        self,
        emitters: Mapping[str, Emitter] | None = None,
        *,
        fragments: Mapping[str, str | os.PathLike[str]] | None = None,
        override: bool = False,
    ) -> Self:
        """A copy of this target that also renders with ``emitters`` (IR op kind →
        ``fn(ctx, op)``) and knows the NNEF ``fragments`` (name → fragment text, or the
        path of a ``.nnef`` file holding it) that emitters ask for with
        ``ctx.use_fragment(name)``. Replacing an emitter or fragment this target
        already has takes ``override=True``. The target itself is not changed."""
        from t2n.backends.additions import checked_emitters, checked_fragments

        fields = {a.name for a in getattr(type(self), "__attrs_attrs__", ())}
        if not {"emitters", "fragments"} <= fields:
            raise InvalidArgumentError(
                f"{type(self).__name__}.with_emitters needs an @attrs.frozen target with "
                "'emitters' and 'fragments' fields (subclass TractNNEF or KhronosNNEF)"
            )
        new_emitters = checked_emitters(self, emitters or {}, override)
        new_fragments = checked_fragments(self, fragments or {}, override)
        evolved: Self = attrs.evolve(cast(Any, self), emitters={**self.emitters, **new_emitters},
                                     fragments={**self.fragments, **new_fragments})
        return evolved

    def __str__(self) -> str:
        return f"{type(self).__name__}({self.version!r})"


def builtin_fragment(name: str, target: str) -> str:
    """The text of t2n's own fragment ``name`` (a ``.nnef`` file beside the emitters)."""
    from importlib import resources

    path = resources.files("t2n.backends.nnef").joinpath(f"fragments/{name}.nnef")
    if not _IDENTIFIER.match(name) or not path.is_file():
        raise InvalidArgumentError(
            f"{target} has no NNEF fragment {name!r}; add it to the target with "
            f".with_emitters(fragments={{{name!r}: text}})"
        )
    return path.read_text().strip()


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _emitter_field() -> Any:
    from t2n.backends.additions import emitter_map

    return attrs.field(factory=dict, kw_only=True, converter=emitter_map, repr=False, hash=False)


def _fragment_field() -> Any:
    from t2n.backends.additions import fragment_map

    return attrs.field(factory=dict, kw_only=True, converter=fragment_map, repr=False, hash=False)


def _axes(value: object) -> Mapping[str, Mapping[int, str]] | None:
    from t2n.passes.dynamic_axes import dynamic_axes_form

    return dynamic_axes_form(value, "TractNNEF(dynamic_axes=...)") or None


def _tract_version(value: object) -> str:
    from t2n.dropin.version import version_text

    return version_text(value, "TractNNEF version")


def _khronos_version(value: object) -> str:
    from t2n.dropin.version import version_text

    return version_text(value, "KhronosNNEF version")


def _check_io(value: object) -> bool | None:
    if value is not None and not isinstance(value, bool):
        raise InvalidArgumentError(
            f"check_io must be True or False (or None: the entry point decides), got {value!r}"
        )
    return value


def _flag(name: str) -> Any:
    def check(value: object) -> bool:
        if not isinstance(value, bool):
            raise InvalidArgumentError(f"TractNNEF({name}=...) must be True or False, got {value!r}")
        return value

    return attrs.field(default=False, kw_only=True, converter=check)


def _tolerance(value: object) -> Any:
    from t2n.check.compare import Tolerance

    return Tolerance.parse(value)


def _properties(value: object) -> Mapping[str, str]:
    from t2n.dropin.properties import checked_properties

    return checked_properties(value)


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


TRACT_LATEST = "0.23.9"
"""The newest tract version t2n emits for and tests against (``TractNNEF.latest()``)."""


def _extensions(value: object) -> tuple[str, ...]:
    from t2n.backends.nnef.extensions import check_custom_extensions

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
    ``debox`` (tract 0.23 and newer).
    """

    version: str = attrs.field(default=TRACT_LATEST, converter=_tract_version)
    bf16_as: DType = attrs.field(default=DType.F16, converter=bf16_export_dtype)
    dynamic_axes: Mapping[str, Mapping[int, str]] | None = attrs.field(default=None, converter=_axes)
    custom_extensions: Sequence[str] = attrs.field(default=(), converter=_extensions)
    emitters: Mapping[str, Emitter] = _emitter_field()
    fragments: Mapping[str, str] = _fragment_field()
    check_io: bool | None = attrs.field(default=None, kw_only=True, converter=_check_io)
    check_io_tolerance: Any = attrs.field(default="approximate", kw_only=True, converter=_tolerance)
    specific_properties: Mapping[str, str] = attrs.field(
        default=None, kw_only=True, converter=_properties, hash=False)
    dump_identity_properties: bool = _flag("dump_identity_properties")
    feature_flags: frozenset[str] = attrs.field(default=None, kw_only=True, converter=_feature_flags)
    reify_sdpa_operator: bool = _flag("reify_sdpa_operator")
    upsample_with_debox: bool = _flag("upsample_with_debox")
    # f32-forcing (t2n.passes.precision): parts of an f16 model computed in f32
    force_attention_inner_in_f32: bool = _flag("force_attention_inner_in_f32")
    force_linear_accumulation_in_f32: bool = _flag("force_linear_accumulation_in_f32")
    force_norm_in_f32: bool = _flag("force_norm_in_f32")

    name: ClassVar[str] = "tract"
    supports_symbols: ClassVar[bool] = True
    accepts_extension_lines: ClassVar[bool] = True
    reads_archives: ClassVar[bool] = True
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
        from t2n.dropin.properties import identity_properties

        return {**identity_properties(), **self.specific_properties}

    def builtin_emitters(self) -> Mapping[str, Emitter]:
        from t2n.backends.nnef.renderer import emitter_table
        from t2n.dropin.emit import tract_form_emitters

        return {**emitter_table("tract"), **tract_form_emitters()}

    def renderer(self) -> NNEFRenderer:
        from t2n.backends.nnef.renderer import tract_renderer

        return tract_renderer(self)

    def run(self, path: Path, inputs: Sequence[np.ndarray], *, registries: Sequence[str] = (),
            symbols: Mapping[str, int] | None = None) -> list[np.ndarray]:
        """Run in tract's Python package, in a worker process (a crash in tract is an
        ``EngineCrashedError``, not the end of this process). With
        ``T2N_TRACT_ENVIRONMENTS=1``, a version other than the installed one runs in that
        version's own environment (:mod:`t2n.check.tract_versions`)."""
        from t2n.check.engines import run_tract
        from t2n.check.tract_versions import run_in_tract_version, uses_environment

        if uses_environment(self.version):
            return run_in_tract_version(self.version, str(path), inputs, registries=registries, symbols=symbols)

        return run_tract(str(path), inputs, registries=registries, symbols=symbols).outputs

    @property
    def engine(self) -> str:
        return f"tract {self.version}"


KHRONOS_VERSIONS = ((1, 0, 5),)
"""The NNEF versions KhronosNNEF emits: t2n uses 1.0.5's operations."""


@attrs.frozen
class KhronosNNEF(Target):
    """Strict Khronos NNEF (1.0.x): standard operations only, static shapes.

    ``check_io`` as for :class:`TractNNEF` (checked in the nnef-tools interpreter)."""

    version: str = attrs.field(default="1.0.5", converter=_khronos_version)
    check_io: bool | None = attrs.field(default=None, converter=_check_io)
    bf16_as: DType = attrs.field(default=DType.F32, converter=bf16_export_dtype, kw_only=True)
    emitters: Mapping[str, Emitter] = _emitter_field()
    fragments: Mapping[str, str] = _fragment_field()

    name: ClassVar[str] = "khronos"

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
        from t2n.backends.nnef.renderer import emitter_table

        return emitter_table("khronos")

    def renderer(self) -> NNEFRenderer:
        from t2n.backends.nnef.renderer import khronos_renderer

        return khronos_renderer(self)

    def run(self, path: Path, inputs: Sequence[np.ndarray], *, registries: Sequence[str] = (),
            symbols: Mapping[str, int] | None = None) -> list[np.ndarray]:
        """Parse with the Khronos ``nnef`` parser and run in the nnef-tools PyTorch
        interpreter (a folder; Khronos NNEF has no symbols or registries), with their
        default options; only fragments the user added to this target are lowered."""
        from t2n.check.engines import run_khronos

        return run_khronos(str(path), inputs, lowered=sorted(self.fragments)).outputs

    @property
    def engine(self) -> str:
        return "Khronos NNEF interpreter"
