"""The pass pipeline of ``compile``: its built-in passes by name, the default order,
and the assembly of a pipeline spec (see :mod:`t2n.passes.spec`) into a PassManager.

Built-in names: ``bf16-as``, ``dynamic-axes``, ``cleanup`` (dead-node elimination and
constant folding to a fixed point), ``fold-batch-norm``, ``constant-folding``,
``dead-node-elimination`` and the f32-forcing passes ``force-attention-inner-in-f32``,
``force-linear-accumulation-in-f32`` and ``force-norm-in-f32``
(:mod:`t2n.passes.precision`). The default pipeline is ``bf16-as, dynamic-axes, cleanup,
fold-batch-norm, cleanup``.

``compile`` always runs ``bf16-as`` and ``dynamic-axes``: they do what the target's
``bf16_as`` and the ``dynamic_axes`` argument ask, and nothing when there is nothing
to do. A spec may place them but not remove them; one that leaves them out gets them
at its start. When the pipeline has a ``cleanup``, it also ends with one (added after
the last pass if needed), so a pass may leave dead ops behind; two cleanups in a row
become one. The f32-forcing passes a target's options ask for (``force_f32``) are added
after the spec's last pass when the spec does not place them itself, then the passes that
write the target's own forms (``target_passes``, e.g. reified SDPA), then the interface passes
(``Pass.interface``: an artifact-level form such as a stateful cache, wherever the spec put
them), before the last cleanup.
The passes that lower ops the target has no form for (``lowering_passes``, e.g. the
mixture-of-experts experts in standard operations) run before the first f32-forcing pass,
wherever the spec or the options put it (else where the forcing passes would go), so the
forcing decides the precision of what they write too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from t2n.errors import InvalidArgumentError
from t2n.ir import DType
from t2n.passes.base import Pass
from t2n.passes.bf16 import Bf16As
from t2n.passes.constant_folding import ConstantFolding
from t2n.passes.dead_node_elimination import DeadNodeElimination
from t2n.passes.dynamic_axes import DynamicAxes
from t2n.passes.fold_batch_norm import FoldBatchNorm
from t2n.passes.manager import DumpFn, PassManager
from t2n.passes.precision import ForceF32Pass, precision_passes
from t2n.passes.spec import DEFAULT_PIPELINE, NAME_RE, REQUIRED, PipelineSpec, parse_spec


def cleanup(verify_each: bool = False, dump: DumpFn | None = None) -> PassManager:
    """Dead-node elimination and constant folding to a fixed point."""
    return PassManager(
        [DeadNodeElimination(), ConstantFolding()], fixed_point=True,
        verify_each=verify_each, dump=dump, label="cleanup",
    )


def builtin_passes(
    *,
    bf16_as: DType = DType.F16,
    dynamic_axes: Mapping[str, Mapping[int, str]] | None = None,
    strict_dynamic_axes: bool = False,
    verify_each: bool = False,
    dump: DumpFn | None = None,
) -> dict[str, Pass]:
    """Every built-in pass by its name, configured as ``compile`` would (a CLI can call
    this with no arguments to list or check names)."""
    return {
        "bf16-as": Bf16As(bf16_as),
        "dynamic-axes": DynamicAxes(dict(dynamic_axes or {}), strict_dynamic_axes),
        "cleanup": cleanup(verify_each, dump),
        "fold-batch-norm": FoldBatchNorm(),
        "constant-folding": ConstantFolding(),
        "dead-node-elimination": DeadNodeElimination(),
        **precision_passes(),
    }


def parse_pipeline(
    spec: PipelineSpec | object,
    known: Mapping[str, Pass] | None = None,
    *,
    default: Sequence[str] = DEFAULT_PIPELINE,
    required: Sequence[str] = REQUIRED,
) -> list[Pass]:
    """The passes ``spec`` names, in order (:func:`t2n.passes.spec.parse_spec`), by
    default among the built-in passes. A command-line tool can pass its ``--passes``
    text straight here: ``parse_pipeline("default,-fold-batch-norm")``."""
    return parse_spec(spec, builtin_passes() if known is None else known, default=default, required=required)


def check_pass_registry(registry: object) -> dict[str, Pass]:
    """``pass_registry``: a mapping name → Pass object, names new to the built-ins."""
    if registry is None:
        return {}
    if not isinstance(registry, Mapping):
        raise InvalidArgumentError(f"pass_registry must be a dict name → t2n.Pass object, got {registry!r}")
    builtin = builtin_passes()
    for name, p in registry.items():
        if not isinstance(name, str) or not NAME_RE.fullmatch(name) or name == "default":
            raise InvalidArgumentError(
                f"pass_registry key {name!r} is not a pass name (letters, digits, '-', '_', '.'; not 'default')"
            )
        if name in builtin:
            raise InvalidArgumentError(
                f"pass_registry key {name!r} is a built-in pass; give your pass another name "
                f"(built-in: {', '.join(builtin)})"
            )
        if not isinstance(p, Pass):
            kind = "a Pass class, not an instance (add '()')" if isinstance(p, type) and issubclass(p, Pass) \
                else f"a {type(p).__name__}, not a t2n.Pass"
            raise InvalidArgumentError(f"pass_registry[{name!r}] = {p!r} is {kind}")
    return dict(registry)


def compile_pipeline(
    spec: PipelineSpec | object = (),
    *,
    registry: Mapping[str, Pass] | None = None,
    builtins: Mapping[str, Pass] | None = None,
    fold_batch_norm: bool = True,
    verify_each: bool = False,
    dump: DumpFn | None = None,
    force_f32: Sequence[str] = (),
    target_passes: Sequence[Pass] = (),
    lowering_passes: Sequence[Pass] = (),
) -> PassManager:
    """The PassManager ``compile`` runs for ``passes=spec`` (a :data:`PipelineSpec`,
    checked here; see the module docstring). ``fold_batch_norm=False`` removes
    ``fold-batch-norm`` wherever it is; ``force_f32`` names f32-forcing passes to run
    after the spec's passes unless the spec has them already; ``lowering_passes`` run
    before the first of them; ``target_passes`` after them all, then the interface passes
    (``Pass.interface``) of the spec (then the final cleanup)."""
    known = {**(builtins if builtins is not None else builtin_passes(verify_each=verify_each, dump=dump)),
             **check_pass_registry(registry)}
    stages = parse_spec(spec, known, default=DEFAULT_PIPELINE, required=REQUIRED)
    if not fold_batch_norm:
        stages = [p for p in stages if p.display_name != "fold-batch-norm"]
    names = [p.display_name for p in stages]
    stages = [known[n] for n in REQUIRED if n not in names] + stages
    interface = [p for p in stages if p.interface]
    stages = [p for p in stages if not p.interface]
    at = next((i for i, p in enumerate(stages) if isinstance(p, ForceF32Pass)), len(stages))
    stages[at:at] = lowering_passes
    stages += [known[n] for n in force_f32 if n not in names]
    stages += [*target_passes, *interface]
    out: list[Pass] = []
    for p in stages:
        if not (p.display_name == "cleanup" and out and out[-1].display_name == "cleanup"):
            out.append(p)
    if any(p.display_name == "cleanup" for p in out) and out[-1].display_name != "cleanup":
        out.append(known["cleanup"])
    return PassManager(out, verify_each=verify_each, dump=dump, label="compile")


__all__ = ["DEFAULT_PIPELINE", "REQUIRED", "builtin_passes", "check_pass_registry", "cleanup",
           "compile_pipeline", "parse_pipeline"]
