"""``t2n inspect ARTIFACT``: what an artifact declares and holds, read from its files
(no engine, no torch): inputs and outputs, symbols and assertions, properties, the
ops it calls, its tensors by dtype, and tensors missing or unused."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import click

from t2n.cli.artifact_files import ArtifactFiles, read_artifact_files
from t2n.cli.main import debug_option, guarded
from t2n.cli.nnef_text import Declared, GraphText, read_graph_text
from t2n.serialize.dat import HEADER_SIZE

_DECLARATIONS = ("external", "tract_core_external", "variable")


def describe_artifact(files: ArtifactFiles, graph: GraphText) -> dict[str, Any]:
    """The summary ``t2n inspect --json`` prints (plain JSON types)."""
    by_dtype: dict[str, dict[str, int]] = {}
    for t in files.tensors:
        row = by_dtype.setdefault(t.dtype.value, {"count": 0, "bytes": 0, "elements": 0})
        row["count"] += 1
        row["bytes"] += t.file_bytes - HEADER_SIZE
        row["elements"] += _elements(t.shape)
    have = {t.path for t in files.tensors}
    wanted = {f"{v.label}.dat" for v in graph.variables if v.label}
    problems = [f"variable {v.name!r}: no tensor file {v.label}.dat in the artifact"
                for v in graph.variables if v.label and f"{v.label}.dat" not in have]
    problems += [f"tensor file {p} is not used by any variable" for p in sorted(have - wanted)]
    return {
        "path": str(files.path),
        "form": files.form,
        "nnef_version": graph.version,
        "graph": graph.graph_name,
        "inputs": [_io(d) for d in graph.inputs],
        "outputs": [{"name": n} for n in graph.outputs],
        "symbols": list(graph.symbols),
        "assertions": list(graph.assertions),
        "registries": list(graph.registries),
        "extensions": list(graph.extensions),
        "properties": dict(graph.properties),
        "fragments": list(graph.fragments),
        "ops": {k: n for k, n in graph.ops.items() if k not in _DECLARATIONS},
        "tensors": {
            "count": len(files.tensors),
            "bytes": sum(r["bytes"] for r in by_dtype.values()),
            "by_dtype": dict(sorted(by_dtype.items())),
        },
        "other_files": list(files.others),
        "problems": problems,
    }


def _elements(shape: Iterable[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _io(d: Declared) -> dict[str, Any]:
    return {"name": d.name, "dtype": d.dtype, "shape": list(d.shape)}


def _shape_text(shape: Iterable[int | str]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"


def render_text(info: dict[str, Any]) -> str:
    """The human-readable form of :func:`describe_artifact`."""
    lines = [f"{info['path']} ({info['form']}, NNEF {info['nnef_version'] or '?'}, graph {info['graph']})"]
    lines.append("inputs:")
    lines += [f"  {i['name']}: {i['dtype']}{_shape_text(i['shape'])}" for i in info["inputs"]]
    lines.append("outputs:")
    lines += [f"  {o['name']}" + (f": {o['dtype']}{_shape_text(o['shape'])}" if "shape" in o else "")
              for o in info["outputs"]]
    for key, title in (("symbols", "symbols"), ("assertions", "assertions"),
                       ("registries", "registries"), ("extensions", "other extensions"),
                       ("fragments", "fragments")):
        if info[key]:
            lines.append(f"{title}: " + ", ".join(info[key]))
    if info["properties"]:
        lines.append("properties:")
        lines += [f"  {k} = {v}" for k, v in info["properties"].items()]
    ops = info["ops"]
    lines.append(f"ops ({sum(ops.values())} calls, {len(ops)} kinds):")
    lines += [f"  {n:6d}  {k}" for k, n in ops.items()]
    t = info["tensors"]
    lines.append(f"tensors: {t['count']}, {_size(t['bytes'])}")
    lines += [f"  {dt}: {r['count']} tensors, {r['elements']} elements, {_size(r['bytes'])}"
              for dt, r in t["by_dtype"].items()]
    if info["other_files"]:
        lines.append("other files: " + ", ".join(info["other_files"]))
    if info["problems"]:
        lines.append("problems:")
        lines += [f"  {p}" for p in info["problems"]]
    if "interface_note" in info:
        lines.append(info["interface_note"])
    if "remodelled" in info:
        after = info["remodelled"]
        lines.append(f"with the plan {after['plan']}:")
        lines.append("  inputs:")
        lines += [f"    {i['name']}: {i['dtype']}{_shape_text(i['shape'])}" for i in after["inputs"]]
        lines.append("  outputs:")
        lines += [f"    {o['name']}: {o['dtype']}{_shape_text(o['shape'])}" for o in after["outputs"]]
        for key in ("symbols", "assertions"):
            if after[key]:
                lines.append(f"  {key}: " + ", ".join(after[key]))
    return "\n".join(lines)


def interface_rows(info: dict[str, Any], artifact: Path, plan_path: Path | None, subnet: str | None) -> None:
    """The outputs' dtypes and shapes as t2n's reader infers them (a note in
    ``interface_note`` when it cannot read the graph), and the interface after ``plan_path``."""
    from t2n.errors import NNEFReadError
    from t2n.reading import read

    try:
        model = read(artifact)
    except NNEFReadError as exc:
        if plan_path is not None:
            raise
        info["interface_note"] = f"output shapes not inferred: {str(exc).splitlines()[0]}"
        return
    for row, out in zip(info["outputs"], model.interface().outputs):
        row.update(dtype=out.dtype, shape=list(out.shape))
    if plan_path is not None:
        after = model.remodel(plan_path, subnet=subnet).interface()
        info["remodelled"] = {"plan": str(plan_path), **after.as_dict()}


@click.command("inspect")
@click.argument("artifact", type=click.Path(exists=True, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the description as JSON (for scripts).")
@click.option("--output-shapes", is_flag=True,
              help="Also give the outputs' dtypes and shapes, as tract infers them (needs tract).")
@click.option("--plan", "plan_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="A remodel plan (YAML/JSON): also show the interface it would give (nothing is written).")
@click.option("--subnet", default=None, help="The sub-network of a multi-graph --plan.")
@debug_option
@guarded
def inspect_command(artifact: Path, as_json: bool, output_shapes: bool, plan_path: Path | None,
                    subnet: str | None) -> None:
    """Describe ARTIFACT (a folder, .tar or .tgz): inputs and outputs with their types,
    shapes and symbols, assertions, properties, the ops it calls (how many of each),
    and its tensors (count and bytes per dtype).

    Reads graph.nnef and the .dat headers only: no engine needed. The outputs' dtypes and
    shapes are inferred by t2n's reader when it knows every operation the graph calls;
    --output-shapes asks tract instead (in a child process). --plan shows the interface a
    remodel plan would give. An artifact that cannot be read (not an archive, no
    graph.nnef, a bad tensor header) fails with exit status 1.
    """
    files = read_artifact_files(artifact)
    graph = read_graph_text(files.graph_nnef, f"{artifact}: graph.nnef")
    info = describe_artifact(files, graph)
    interface_rows(info, artifact, plan_path, subnet)
    if output_shapes:
        from t2n.cli.facts import output_facts

        facts = output_facts(artifact, graph.registries)
        for row, fact in zip(info["outputs"], facts):
            row.update(fact)
    click.echo(json.dumps(info, indent=2) if as_json else render_text(info))
