"""``t2n tensors SRC DEST [--filter REGEX]``: a checkpoint's tensors as NNEF ``.dat``
files (``t2n.export_tensors_from_disk_to_nnef``), or just their list (``--list``)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import click

from t2n.cli.main import debug_option, guarded
from t2n.errors import InvalidArgumentError


class _Listed(Exception):
    """Stops the export once the selected tensors are known (``--list``)."""

    def __init__(self, found: dict[str, Any]) -> None:
        super().__init__("listed")
        self.found = found


def _regex(ctx: click.Context, param: click.Parameter, value: str | None) -> re.Pattern[str] | None:
    if value is None:
        return None
    try:
        return re.compile(value)
    except re.error as exc:
        raise click.BadParameter(f"{value!r} is not a regular expression: {exc}", ctx, param) from exc


@click.command("tensors")
@click.argument("src", type=click.Path(exists=True, path_type=Path))
@click.argument("dest", type=click.Path(file_okay=False, path_type=Path), required=False)
@click.option("--filter", "pattern", callback=_regex, metavar="REGEX",
              help="Only tensors whose name matches REGEX (re.search), e.g. '^encoder\\.'.")
@click.option("--bf16-as", type=click.Choice(["f16", "f32"]), default="f16", show_default=True,
              help="The type bf16 tensors are written as (NNEF has no bf16).")
@click.option("--list", "list_only", is_flag=True, help="Print the selected tensors; write nothing (DEST not needed).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@debug_option
@guarded
def tensors_command(src: Path, dest: Path | None, pattern: re.Pattern[str] | None, bf16_as: str,
                    list_only: bool, as_json: bool) -> None:
    """Write the tensors of SRC (a .safetensors file, a sharded checkpoint's index.json
    or folder, or a .pt/.pth/.bin file) into the folder DEST, one NNEF .dat file per
    tensor, named after the tensor (a.b.weight -> DEST/a.b.weight.dat; other
    characters than letters, digits, '.', '_', '-' written %XX).

    All files are written, or none; only the .dat files written are replaced in DEST.
    """
    if dest is None and not list_only:
        raise click.UsageError("give DEST, the folder to write the .dat files into (or --list)")
    from t2n.serialize.torch_io import export_tensors_from_disk_to_nnef

    seen: list[str] = []

    def keep(name: str) -> bool:
        seen.append(name)
        return pattern is None or pattern.search(name) is not None

    def confirm(found: dict[str, Any]) -> bool:
        if not found:
            sample = ", ".join(seen[:5]) + (", ..." if len(seen) > 5 else "")
            raise InvalidArgumentError(
                f"--filter {pattern.pattern if pattern else ''!r} matches none of the {len(seen)} tensors "
                f"in {src} ({sample or 'none'}); nothing was written. What to do: change the "
                "regular expression (it is searched in each name); --list shows the names")
        if list_only:
            raise _Listed(found)
        return True

    try:
        written = export_tensors_from_disk_to_nnef(src, dest or Path("."), filter_key=keep,
                                                   fn_check_found_tensors=confirm, bf16_as=bf16_as)
    except _Listed as listed:
        _print_listed(listed.found, as_json)
        return
    rows: list[dict[str, Any]] = [{"name": w.name, "file": w.path.name, "dtype": w.dtype.value, "shape": list(w.shape),
             "bytes": w.nbytes} for w in written.values()]
    if as_json:
        click.echo(json.dumps({"dest": str(dest), "tensors": rows}, indent=2))
        return
    click.echo(f"wrote {len(rows)} tensors ({sum(r['bytes'] for r in rows)} bytes) to {dest}")


def _print_listed(found: dict[str, Any], as_json: bool) -> None:
    rows = [{"name": n, "dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape)}
            for n, t in found.items()]
    if as_json:
        click.echo(json.dumps({"tensors": rows}, indent=2))
        return
    for r in rows:
        click.echo(f"{r['name']}: {r['dtype']}{r['shape']}")
