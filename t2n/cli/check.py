"""``t2n check ARTIFACT --inputs in.npz [--outputs ref.npz]``: run an artifact in its
engine (a child process, so an engine crash is reported, not fatal), and compare with
reference outputs, or print and save what it computed."""

from __future__ import annotations

import json
import os
import zipfile
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import numpy as np

from t2n.cli.artifact_files import as_folder, read_artifact_files
from t2n.cli.main import debug_option, fail, guarded
from t2n.cli.nnef_text import Declared, GraphText, read_graph_text
from t2n.cli.params import KeyValueType, key_values, tolerance_option
from t2n.errors import CheckMismatchError, InvalidArgumentError

if TYPE_CHECKING:
    from t2n.check.compare import CheckReport, Tolerance


def load_arrays(path: Path, names: Sequence[str], what: str, option: str) -> list[np.ndarray]:
    """One array per name from an ``.npz`` file: by name, or, when the file holds
    ``arr_0``, ``arr_1``... (``numpy.savez(file, *arrays)``), by position."""
    try:
        with np.load(path, allow_pickle=False) as npz:
            found = {k: npz[k] for k in npz.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise InvalidArgumentError(
            f"{option} {path}: cannot read it as a .npz file ({type(exc).__name__}: {exc}). "
            f"What to do: write the {what}s with numpy.savez(path, {names[0] if names else 'name'}=array, ...)"
        ) from exc
    positional = [f"arr_{i}" for i in range(len(names))]
    keys = list(found)
    if set(keys) == set(names):
        return [found[n] for n in names]
    if keys == positional or sorted(keys) == sorted(positional):
        return [found[k] for k in positional]
    missing = [n for n in names if n not in found]
    extra = [k for k in keys if k not in names]
    raise InvalidArgumentError(
        f"{option} {path}: the artifact's {what}s are {', '.join(names) or '(none)'}, but the file "
        f"holds {', '.join(keys) or 'no arrays'}"
        + (f"; missing: {', '.join(missing)}" if missing else "")
        + (f"; not {what}s of the artifact: {', '.join(extra)}" if extra else "")
        + f". What to do: save one array per {what} under its name (numpy.savez(path, "
        f"{names[0] if names else 'name'}=...)), or all of them by position (numpy.savez(path, *arrays))")


_NUMPY = {"f32": "float32", "f16": "float16", "f64": "float64", "i64": "int64", "i32": "int32",
          "i16": "int16", "i8": "int8", "u8": "uint8", "u16": "uint16", "bool": "bool"}


def check_declared(declared: Sequence[Declared], arrays: Sequence[np.ndarray]) -> None:
    """Each input array has the dtype and the fixed sizes the artifact declares (an
    engine would refuse it later, less clearly)."""
    for d, a in zip(declared, arrays):
        want = _NUMPY.get(d.dtype)
        if want is not None and a.dtype != np.dtype(want):
            raise InvalidArgumentError(
                f"--inputs: input {d.name!r} is {a.dtype} but the artifact declares {d.dtype} "
                f"({want}); save it as {want} (array.astype(numpy.{want}))")
        if d.shape and (len(d.shape) != a.ndim or any(
                isinstance(s, int) and s != n for s, n in zip(d.shape, a.shape))):
            shape = ", ".join(str(s) for s in d.shape)
            raise InvalidArgumentError(
                f"--inputs: input {d.name!r} has shape {list(a.shape)} but the artifact declares "
                f"[{shape}] (symbols may take any size); save an array of that shape")


def refuse_tract_artifact(artifact: Path, graph: GraphText) -> None:
    """A tract artifact (tract extension lines or ``tract_`` ops) cannot load in a Khronos
    consumer: say so, instead of the parser's first complaint."""
    tract = [*(f"extension {e}" for e in graph.registries[:1]), *(f"symbol {s}" for s in graph.symbols[:1]),
             *(op for op in graph.ops if op.startswith("tract_"))]
    if tract:
        raise InvalidArgumentError(
            f"{artifact} is written for tract (it uses {', '.join(tract[:4])}), which Khronos NNEF "
            "consumers do not read; check it with --engine tract, or export with --target khronos")


def _target(engine: str) -> Any:
    from t2n.backends.khronos.target import KhronosNNEF
    from t2n.backends.tract.target import TractNNEF

    return TractNNEF() if engine == "tract" else KhronosNNEF()


def _describe_output(name: str, a: np.ndarray) -> str:
    stats = ""
    if a.size and a.dtype.kind in "biuf":
        f = a.astype(np.float64)
        stats = f" min {np.nanmin(f):.6g} max {np.nanmax(f):.6g} mean {np.nanmean(f):.6g}"
    return f"  {name}: {a.dtype}{list(a.shape)}{stats}"


@click.command("check")
@click.argument("artifact", type=click.Path(exists=True, path_type=Path))
@click.option("--inputs", "inputs_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A .npz file with one array per model input, by input name (or arr_0, arr_1... in order).")
@click.option("--io", "io_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Instead of --inputs/--outputs: a .npz of several runs with their expected outputs "
                   "(STEP/inputs/NAME, STEP/outputs/NAME, as t2n llm writes tests/io.npz), replayed "
                   "in order in tract.")
@click.option("--outputs", "outputs_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A .npz file with the expected outputs (by output name, or in order); "
                   "without it the outputs are printed (and saved with --write-outputs).")
@click.option("--engine", type=click.Choice(["tract", "khronos"]), default="tract", show_default=True,
              help="tract (its Python package), or the Khronos NNEF interpreter (nnef-tools).")
@tolerance_option()
@click.option("--symbol", "symbols", multiple=True, type=KeyValueType(integer=True),
              help="Give a symbol its value before running (tract), e.g. --symbol S=12. Repeatable.")
@click.option("-w", "--write-outputs", type=click.Path(dir_okay=False, path_type=Path),
              help="Save the engine's outputs to this .npz file, by output name.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@debug_option
@guarded
def check_command(artifact: Path, inputs_path: Path | None, io_path: Path | None, outputs_path: Path | None,
                  engine: str, tolerance: str, symbols: tuple[tuple[str, int], ...], write_outputs: Path | None,
                  as_json: bool) -> None:
    """Run ARTIFACT (a folder, .tar or .tgz) on the inputs in --inputs.

    With --outputs, compare with those outputs at --tolerance: exit status 0 when all
    match, 1 on a mismatch (the report says which output and by how much). Without
    it, print each output's dtype, shape and range. An engine that refuses or crashes
    on the artifact also exits with 1, saying what it was doing.
    """
    from t2n.backends.running import run_on_target
    from t2n.check.assertions import check_bounds
    from t2n.check.compare import compare

    if io_path is not None:
        _check_io_steps(artifact, io_path, inputs_path, outputs_path, engine, tolerance, as_json)
        return
    if inputs_path is None:
        raise click.UsageError("give --inputs (a .npz of the model's inputs) or --io (a .npz of runs)")
    files = read_artifact_files(artifact)
    graph = read_graph_text(files.graph_nnef, f"{artifact}: graph.nnef")
    inputs = load_arrays(inputs_path, [d.name for d in graph.inputs], "input", "--inputs")
    expected = (load_arrays(outputs_path, list(graph.outputs), "output", "--outputs")
                if outputs_path is not None else None)
    if engine == "khronos":
        refuse_tract_artifact(artifact, graph)
    target = _target(engine)
    check_declared(graph.inputs, inputs)
    check_bounds(graph.assertions, {d.name: d.shape for d in graph.inputs}, [d.name for d in graph.inputs],
                 inputs, key_values(symbols, "--symbol") or None, str(artifact))
    place: AbstractContextManager[Path] = as_folder(artifact) if engine == "khronos" else nullcontext(artifact)
    with place as path:
        got = run_on_target(target, path, inputs, registries=graph.registries,
                            symbols=key_values(symbols, "--symbol") or None)
    if write_outputs is not None:
        arrays: dict[str, Any] = dict(zip(graph.outputs, got))
        np.savez(write_outputs, **arrays)
    if expected is None:
        _print_outputs(target.engine, graph.outputs, got, as_json)
        return
    report = compare(target.engine, graph.outputs, got, expected, tolerance)
    if as_json:
        click.echo(json.dumps({"ok": report.ok, "engine": report.engine, "tolerance": report.tolerance.value,
                               "outputs": [_report_row(o) for o in report.outputs]}, indent=2))
    else:
        click.echo(str(report))
    if not report.ok:
        fail(f"the outputs of {artifact} differ from {outputs_path} beyond tolerance '{tolerance}'")


def _check_io_steps(artifact: Path, io_path: Path, inputs_path: Path | None, outputs_path: Path | None,
                    engine: str, tolerance: str, as_json: bool) -> None:
    """``--io``: every step of the file, in tract; exit status 1 at the first mismatch
    (``CheckMismatchError`` naming the step)."""
    if inputs_path is not None or outputs_path is not None or engine != "tract":
        raise click.UsageError("--io replays in tract on its own: drop --inputs, --outputs and --engine")
    reports = replay_io_npz(artifact, io_path, tolerance)  # CheckMismatchError: exit status 1, named step
    if as_json:
        click.echo(json.dumps({"ok": True, "steps": [
            {"step": name, "outputs": [_report_row(o) for o in r.outputs]} for name, r in reports]}, indent=2))
        return
    for name, report in reports:
        click.echo(f"step {name}: {report}")


def replay_io_npz(artifact: str | os.PathLike[str], io_path: str | os.PathLike[str],
                  tolerance: Tolerance | str = "approximate") -> list[tuple[str, CheckReport]]:
    """Run every step of ``io_path`` in tract on ``artifact`` (a folder, ``.tar`` or
    ``.tgz``) and compare; returns ``(step, report)`` pairs. Raises
    :class:`CheckMismatchError` naming the first step whose outputs differ."""
    from t2n.backends.running import run_on_target
    from t2n.backends.tract.target import TractNNEF
    from t2n.check.assertions import check_bounds
    from t2n.check.compare import compare
    from t2n.check.io_npz import read_io_npz

    graph = read_graph_text(read_artifact_files(Path(artifact)).graph_nnef, f"{artifact}: graph.nnef")
    target = TractNNEF()
    reports: list[tuple[str, CheckReport]] = []
    for step in read_io_npz(io_path):
        inputs, expected = step.arrays([d.name for d in graph.inputs], graph.outputs, str(io_path))
        check_bounds(graph.assertions, {d.name: d.shape for d in graph.inputs}, [d.name for d in graph.inputs],
                     inputs, None, f"{artifact} (step {step.name!r} of {io_path})")
        got = run_on_target(target, Path(artifact), inputs, registries=graph.registries)
        report = compare(target.engine, list(graph.outputs), got, expected, tolerance)
        if not report.ok:
            raise CheckMismatchError(
                f"step {step.name!r} of {io_path}: {report}\nWhat to do: the artifact no longer computes "
                "what these samples hold; export again (samples and graph together) or compare at a "
                "looser tolerance", report)
        reports.append((step.name, report))
    return reports


def _report_row(o: Any) -> dict[str, Any]:
    return {"name": o.name, "ok": o.ok, "shape": list(o.shape), "dtype": o.dtype, "max_abs": o.max_abs,
            "max_rel": o.max_rel, "mismatched": o.mismatched, "note": o.note}


def _print_outputs(engine: str, names: Sequence[str], got: Sequence[np.ndarray], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps({"engine": engine, "outputs": [
            {"name": n, "dtype": str(a.dtype), "shape": list(a.shape)} for n, a in zip(names, got)]}, indent=2))
        return
    click.echo(f"{engine}: {len(got)} output(s)")
    for n, a in zip(names, got):
        click.echo(_describe_output(n, a))
