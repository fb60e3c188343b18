"""``t2n export SPEC -o out.nnef.tgz``: ``t2n.export`` from a shell, for a Python
factory or a TorchScript file (see :mod:`t2n.cli.factory` for what SPEC may be)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import click
import numpy as np

from t2n.cli.main import debug_option, guarded
from t2n.cli.params import (
    DTYPES,
    DynamicAxis,
    DynamicAxisType,
    KeyValueType,
    ShapeType,
    dynamic_axes_mapping,
    key_values,
    tolerance_option,
    version_callback,
)
from t2n.errors import DynamicAxesError, TraceError

if TYPE_CHECKING:
    from t2n.artifact import Artifact
    from t2n.cli.factory import ModelSource
    from t2n.options import CompileOptions, WriteOptions


def _target(target: str, tract_version: str | None, bf16_as: str | None) -> Any:
    from t2n.backends.khronos.target import KhronosNNEF
    from t2n.backends.tract.target import TractNNEF

    if target == "khronos":
        if tract_version is not None:
            raise click.BadParameter("--tract-version is for --target tract", param_hint="--tract-version")
        return KhronosNNEF(bf16_as=bf16_as or "f32")
    kw: dict[str, Any] = {"bf16_as": bf16_as or "f16"}
    if tract_version is not None:
        kw["version"] = tract_version
    return TractNNEF(**kw)


def _extensions(target: str, asserts: tuple[str, ...], extensions: tuple[str, ...]) -> list[str]:
    if target == "khronos" and (asserts or extensions):
        raise click.BadParameter("Khronos NNEF has no extension lines; --assert and --extension are "
                                 "for --target tract", param_hint="--assert/--extension")
    return [f"tract_assert {a.strip()}" for a in asserts] + list(extensions)


def _check_output(output: Path, compression_level: int | None, overwrite: bool) -> None:
    """Refuse a destination before the model is loaded: a suffix that is no artifact
    form is a usage error; something t2n did not write there, a failure (exit 1)."""
    from t2n.errors import InvalidArgumentError
    from t2n.serialize.archive import artifact_form
    from t2n.serialize.destination import check_destination

    try:
        artifact_form(output, compression_level)
    except InvalidArgumentError as exc:
        raise click.BadParameter(str(exc), param_hint="--output") from exc
    check_destination(output, overwrite)


def _shape_text(shape: tuple[int, ...]) -> str:
    return ",".join(map(str, shape)) or "(scalar)"


def _save_io(folder: Path, artifact: Any) -> None:
    """The example inputs and PyTorch's outputs as ``inputs.npz``/``outputs.npz`` (by
    name), ready for ``t2n check --inputs ... --outputs ...``."""
    folder.mkdir(parents=True, exist_ok=True)
    inputs: dict[str, Any] = dict(zip(artifact.input_names, artifact.example_inputs))
    np.savez(folder / "inputs.npz", **inputs)
    if artifact.reference_outputs:
        outputs: dict[str, Any] = dict(zip(artifact.output_names, artifact.reference_outputs))
        np.savez(folder / "outputs.npz", **outputs)


@click.command("export")
@click.argument("spec", metavar="SPEC")
@click.option("-o", "--output", required=True, type=click.Path(path_type=Path),
              help="Where to write: a folder, FILE.tar or FILE.tgz (by suffix, or --compression-level).")
@click.option("--target", type=click.Choice(["tract", "khronos"]), default="tract", show_default=True,
              help="tract's NNEF dialect, or strict Khronos NNEF 1.0.5 (standard operations only).")
@click.option("--tract-version", callback=version_callback,
              help="The tract version the artifact must load in (default: t2n's tested version).")
@click.option("--bf16-as", type=click.Choice(["f16", "f32"]),
              help="The type bf16 tensors are exported as (default: f16 for tract, f32 for Khronos).")
@click.option("--input-name", "input_names", multiple=True, help="Name of each input, in order (repeat).")
@click.option("--output-name", "output_names", multiple=True, help="Name of each output, in order (repeat).")
@click.option("--dynamic-axis", "dynamic_axes", multiple=True, type=DynamicAxisType(),
              help="INPUT:AXIS:SYMBOL, e.g. inp:1:S: that axis takes any size (tract; repeat).")
@click.option("--assert", "asserts", multiple=True, metavar="EXPR",
              help="A tract assertion on symbols, e.g. 'S <= 4096' (repeat).")
@click.option("--extension", "extensions", multiple=True, metavar="LINE",
              help="An extension line for graph.nnef, e.g. 'tract_assert S >= 2' (repeat).")
@click.option("--input-shape", "shapes", multiple=True, type=ShapeType(),
              help="TorchScript files: the shape of each example input, e.g. 1,3,224,224 (repeat, in order).")
@click.option("--input-dtype", "dtypes", multiple=True, type=click.Choice(DTYPES),
              help="TorchScript files: the dtype of each example input (repeat, in order; default float32).")
@click.option("--factory-arg", "factory_args", multiple=True, type=KeyValueType(),
              help="NAME=VALUE passed to the factory as a keyword argument (a string; repeat).")
@click.option("--check/--no-check", default=False, show_default=True,
              help="Run the artifact in the target's engine and compare with PyTorch.")
@tolerance_option()
@click.option("--overwrite", is_flag=True,
              help="Replace what is at --output even if t2n did not write it.")
@click.option("--compression-level", type=click.IntRange(0, 9),
              help="0: .tar, 1-9: gzip level of a .tgz (default: by the suffix of --output).")
@click.option("--passes", metavar="SPEC", help="Pass pipeline, e.g. 'default,-fold-batch-norm'.")
@click.option("--weights-from", type=click.Path(exists=True, path_type=Path),
              help="Read parameters by name from a .safetensors, sharded index or .pt/.bin file.")
@click.option("--strict", is_flag=True, help="Fail where the trace kept values of the example inputs' data.")
@click.option("--strict-dynamic-axes", is_flag=True,
              help="Fail where a size that should follow a symbol was baked in.")
@click.option("--dump-ir", type=click.Path(file_okay=False, path_type=Path),
              help="Write the IR after each pass into this folder.")
@click.option("--save-io", type=click.Path(file_okay=False, path_type=Path),
              help="Write the example inputs and PyTorch's outputs here (inputs.npz, outputs.npz).")
@click.option("--json", "as_json", is_flag=True, help="Print a summary as JSON.")
@click.option("--frontend", type=click.Choice(["jit", "export"]), default="jit", show_default=True,
              help="Read the model with torch.jit.trace (jit) or torch.export (export).")
@click.option("--sampling", type=click.Choice(["refuse", "inputs"]), default="refuse", show_default=True,
              help="Random draws in forward (torch.randn...): refuse them, or make each a graph input (noise_0...).")
@debug_option
@guarded
def export_command(spec: str, output: Path, target: str, tract_version: str | None, bf16_as: str | None,
                   input_names: tuple[str, ...], output_names: tuple[str, ...],
                   dynamic_axes: tuple[DynamicAxis, ...], asserts: tuple[str, ...], extensions: tuple[str, ...],
                   shapes: tuple[tuple[int, ...], ...], dtypes: tuple[str, ...],
                   factory_args: tuple[tuple[str, str], ...], check: bool, tolerance: str, overwrite: bool,
                   compression_level: int | None, passes: str | None, weights_from: Path | None,
                   strict: bool, strict_dynamic_axes: bool, dump_ir: Path | None, save_io: Path | None,
                   as_json: bool, frontend: str = "jit", sampling: str = "refuse") -> None:
    """Export the model SPEC names to NNEF at --output.

    SPEC is MODULE:FACTORY (a dotted module importable from the current folder, or
    FILE.py:FACTORY): FACTORY(**factory_args) returns (model, example_inputs) or
    (model, example_inputs, kwargs), where example_inputs is one tensor or a tuple of
    positional arguments. Or SPEC is a TorchScript file (torch.jit.save), with one
    --input-shape (and --input-dtype) per input.

    \b
    Examples:
      t2n export mymodels.py:build -o model.nnef.tgz --check
      t2n export pkg.models:tiny -o out/ --input-name ids --dynamic-axis ids:1:S --assert 'S <= 4096'
      t2n export scripted.pt --input-shape 1,3,224,224 -o model.nnef.tar --target khronos
    """
    from t2n.options import compile_options, write_options

    tgt = _target(target, tract_version, bf16_as)
    options = compile_options(
        tgt, input_names=list(input_names) or None, output_names=list(output_names) or None,
        dynamic_axes=dynamic_axes_mapping(dynamic_axes) or None,
        custom_extensions=_extensions(target, asserts, extensions), strict=strict,
        strict_dynamic_axes=strict_dynamic_axes, frontend=frontend, passes=passes or (),
        weights_from=weights_from, dump_ir=dump_ir, sampling=sampling)
    write = write_options(output, compression_level=compression_level, overwrite=overwrite)
    _check_output(output, compression_level, overwrite)
    from t2n.cli.factory import load_source

    source = load_source(spec, shapes=shapes, dtypes=dtypes, factory_kwargs=key_values(factory_args, "--factory-arg"))
    if source.kwargs:
        options = attrs.evolve(options, kwargs=source.kwargs)
    t0 = time.perf_counter()
    artifact = _export_with_hints(source, write, options, shapes=shapes, dynamic_axes=dynamic_axes)
    elapsed = time.perf_counter() - t0
    if save_io is not None:
        _save_io(save_io, artifact)
    report = artifact.check(tolerance) if check else None
    _print_summary(output, tgt, artifact, report, elapsed, as_json=as_json)


def _export_with_hints(source: ModelSource, write: WriteOptions, options: CompileOptions, *,
                       shapes: tuple[tuple[int, ...], ...], dynamic_axes: tuple[DynamicAxis, ...]) -> Artifact:
    """``export_model``, its trace and dynamic-axis errors told what the flags that made the
    example inputs and the axes mean, since the shell user never wrote the Python call."""
    from t2n.driver.export import export_model

    try:
        return export_model(source.model, source.args, write, options)
    except TraceError as exc:
        if not shapes:
            raise
        raise TraceError(
            f"{source.origin}: {exc}\n(the example inputs come from --input-shape/--input-dtype: one "
            f"--input-shape per input of its forward, in order; given: {', '.join(map(_shape_text, shapes))})"
        ) from exc
    except DynamicAxesError as exc:
        if not dynamic_axes:
            raise
        raise DynamicAxesError(
            f"{exc}\n(--dynamic-axis INPUT:AXIS:SYMBOL names an input by its name: the names are "
            "input_0, input_1... unless given in order with --input-name)") from exc


def _print_summary(output: Path, tgt: Any, artifact: Artifact, report: Any, elapsed: float, *,
                   as_json: bool) -> None:
    """What was written, as JSON for scripts or one line for people (then the check's report)."""
    summary = {
        "path": str(output), "target": str(tgt.engine), "seconds": round(elapsed, 3),
        "inputs": list(artifact.input_names), "outputs": list(artifact.output_names),
        "tensors": len(artifact.tensor_files), "bytes": artifact.stats.get("bytes_written", 0),
        "check": None if report is None else {"ok": report.ok, "max_abs": report.max_abs},
    }
    if as_json:
        click.echo(json.dumps(summary, indent=2))
        return
    click.echo(f"wrote {output} for {tgt.engine} in {elapsed:.2f} s: {summary['tensors']} tensors, "
               f"{summary['bytes']} bytes; inputs {', '.join(artifact.input_names)}; "
               f"outputs {', '.join(artifact.output_names)}")
    if report is not None:
        click.echo(str(report))
