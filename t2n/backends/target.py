"""The base of targets: what an artifact is exported for, how it is rendered and how it
runs. The built-in targets live with their dialects (:mod:`t2n.backends.tract`,
:mod:`t2n.backends.khronos`); the shared NNEF renderer below them knows a target only
as :class:`~t2n.backends.nnef.context.RenderTarget`."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Self, cast

import attrs
import numpy as np

from t2n.backends.additions import checked_emitters, checked_fragments, emitter_map, fragment_map
from t2n.check.compare import Tolerance
from t2n.errors import InvalidArgumentError
from t2n.ir import DType
from t2n.ir.identifiers import STANDARD_IDENTIFIERS, IdentifierRules
from t2n.passes.base import Pass

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


def version_text(value: object, what: str = "version") -> str:
    """``"0.23.0"`` from ``"0.23.0"``, ``(0, 23, 0)``, or an object with integer
    ``major``, ``minor`` and ``patch`` (or ``micro``) attributes. Text is returned as
    given (the target checks its form); anything else is an ``InvalidArgumentError``
    naming ``what``."""
    if isinstance(value, str):
        return value
    if isinstance(value, tuple) and 2 <= len(value) <= 3 and all(_natural(p) for p in value):
        return ".".join(str(p) for p in (*value, 0)[:3])
    parts = [getattr(value, "major", None), getattr(value, "minor", None),
             getattr(value, "patch", getattr(value, "micro", None))]
    if all(_natural(p) for p in parts) and not isinstance(value, (int, float)):
        return ".".join(str(p) for p in parts)
    if isinstance(value, (int, float)):
        parse_version(value, what)  # raises, with the float hint
    raise InvalidArgumentError(
        f"{what} must be a string such as '0.23.9', a tuple such as (0, 23, 9) or a version "
        f"object with major, minor and patch (or micro) numbers; got {type(value).__name__} {value!r}"
    )


def _natural(part: object) -> bool:
    return isinstance(part, int) and not isinstance(part, bool) and part >= 0


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
    dynamic_axes: Mapping[str, Mapping[int, str]] | None = None
    """Dynamic axes of every compile for this target (merged with the call's)."""
    custom_extensions: Sequence[str] = ()
    """``extension`` lines of every artifact for this target."""
    check_io: bool | None = None
    """Run the artifact in this target's engine after export (``None``: the entry point decides)."""
    check_io_tolerance: Tolerance | None = None
    """The tolerance of that check (``None``: the entry point's)."""

    name: ClassVar[str] = ""
    supports_symbols: ClassVar[bool] = False
    accepts_extension_lines: ClassVar[bool] = False
    """``custom_extensions`` (tract ``extension`` lines) may be given."""
    reads_archives: ClassVar[bool] = False
    """:meth:`run` loads a ``.tar``/``.tgz`` as it is (else it is given a folder)."""
    identifier_rules: ClassVar[IdentifierRules] = STANDARD_IDENTIFIERS
    """Which names this target's engine reads as identifiers (input/output names,
    and the names emitters make up)."""
    allows_same_io_names: ClassVar[bool] = True
    """graph.nnef may list one tensor as both input and output (``allow_same_io_names``)."""
    casts_set_precision: ClassVar[bool] = False
    """A cast to f32 makes the engine compute in f32 (the f32-forcing passes may run)."""

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

    def refusals(self) -> Mapping[str, str]:
        """IR op → why this target has no form for it (said when it refuses a graph):
        every IR op has an emitter or a line here (``tests/backends/test_refusal_table.py``)."""
        return {}

    def native_ops(self) -> frozenset[str]:
        """IR ops the frontend writes as one op because this target's engine runs them
        natively (else their decomposition): none by default."""
        return frozenset()

    def passes(self) -> list[Pass]:
        """The passes that write this target's own forms (tract's SDPA, debox...), run at
        the end of the compile pipeline, before its last cleanup: none by default."""
        return []

    def lowering_passes(self) -> list[Pass]:
        """The passes that write IR ops this target has no emitter for in ops it has (its
        own fused op where one fits, else standard operations): run before the f32-forcing
        passes, so those decide the precision of what the lowering writes; none by default."""
        return []

    def forced_f32_passes(self) -> list[str]:
        """The names of the f32-forcing passes this target's options ask for (added to
        the pipeline unless its spec places them): none by default."""
        return []

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

    def has_fragment(self, name: str) -> bool:
        """Whether :meth:`fragment_text` knows fragment ``name``."""
        try:
            self.fragment_text(name)
        except InvalidArgumentError:
            return False
        return True

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
        fields = {a.name for a in getattr(type(self), "__attrs_attrs__", ())}
        if not {"emitters", "fragments"} <= fields:
            raise InvalidArgumentError(
                f"{type(self).__name__}.with_emitters needs an @attrs.frozen target with "
                "'emitters' and 'fragments' fields (subclass TractNNEF or KhronosNNEF)"
            )
        new_emitters = checked_emitters(self.emitter_table(), emitters or {}, override, str(self))
        new_fragments = checked_fragments(self.has_fragment, fragments or {}, override, str(self))
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


def emitter_field() -> Any:
    """The ``emitters`` field of an ``@attrs.frozen`` target (checked when it is made)."""
    return attrs.field(factory=dict, kw_only=True, converter=emitter_map, repr=False, hash=False)


def fragment_field() -> Any:
    """The ``fragments`` field of an ``@attrs.frozen`` target (checked when it is made)."""
    return attrs.field(factory=dict, kw_only=True, converter=fragment_map, repr=False, hash=False)


def check_io_flag(value: object) -> bool | None:
    """``check_io=``: True, False, or None (the entry point decides)."""
    if value is not None and not isinstance(value, bool):
        raise InvalidArgumentError(
            f"check_io must be True or False (or None: the entry point decides), got {value!r}"
        )
    return value
