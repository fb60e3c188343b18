"""``t2n remodel ARTIFACT --plan plan.yaml -o OUT``: read an artifact, carry out a remodel
plan on its interface (collapse size-1 axes, bind scalars to sizes, rename symbols,
keep outputs), write the result; ``--check`` runs both in the engine on the same data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from t2n.cli.main import debug_option, fail, guarded
from t2n.cli.params import KeyValueType, key_values, tolerance_option


def _sizes(symbols: tuple[str, ...], given: dict[str, int]) -> list[dict[str, int]]:
    """The symbol sizes to check at: those given, else every symbol at 1, then at 5."""
    if given:
        return [given]
    return [dict.fromkeys(symbols, 1), dict.fromkeys(symbols, 5)] if symbols else [{}]


@click.command("remodel")
@click.argument("artifact", type=click.Path(exists=True, path_type=Path))
@click.option("--plan", "plan_path", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The remodel plan: a .yaml/.yml or .json file (see docs/remodeler.md).")
@click.option("-o", "--output", required=True, type=click.Path(path_type=Path),
              help="Where to write the remodelled artifact (a folder, .tar or .tgz, by suffix).")
@click.option("--subnet", default=None, help="The sub-network of a multi-graph plan to apply.")
@click.option("--overwrite", is_flag=True, help="Replace OUTPUT even if t2n did not write it.")
@click.option("--check", "check", is_flag=True,
              help="Run the original and the remodelled artifact in the engine on the same data and compare.")
@click.option("--size", "sizes", multiple=True, type=KeyValueType(integer=True),
              help="SYMBOL=N: a size to --check at (repeat per symbol; default: every symbol at 1, then 5).")
@tolerance_option()
@click.option("--json", "as_json", is_flag=True, help="Print what was done as JSON.")
@debug_option
@guarded
def remodel_command(artifact: Path, plan_path: Path, output: Path, subnet: str | None, overwrite: bool,
                    check: bool, sizes: tuple[tuple[str, int], ...], tolerance: str, as_json: bool) -> None:
    """Carry out the remodel plan on ARTIFACT's interface and write the result to OUTPUT.

    Prints the interface before and after (inputs, outputs, symbols, assertions) and what
    each boundary pass did. Fails with exit status 1, naming the plan key, when the plan
    does not fit the artifact.
    """
    from t2n.reading import read
    from t2n.remodel.check import compare_runs

    model = read(artifact)
    done = model.remodel(plan_path, subnet=subnet).history[-1]
    reports: list[dict[str, Any]] = []
    if check:
        original = read(artifact)
        for at in _sizes(done.after.symbols, key_values(sizes, "--size")):
            report = compare_runs(done.io_map(), original.run, model.run, at, tolerance)
            reports.append({"sizes": at, "ok": report.ok, "max_abs": report.max_abs, "text": str(report)})
            if not report.ok:
                fail(f"the remodelled artifact differs from the original at {at}:\n{report}")
    model.save(output, overwrite=overwrite)
    stats = {k: v for k, v in done.result.stats.items() if k != "sweeps"}
    if as_json:
        click.echo(json.dumps({"before": done.before.as_dict(), "after": done.after.as_dict(), "passes": stats,
                               "checks": reports, "output": str(output)}, indent=2))
        return
    lines = [f"{artifact}:", *("  " + line for line in done.before.lines()), f"remodelled ({plan_path.name}):",
             *("  " + line for line in done.after.lines()), "passes:"]
    lines += [f"  {k} = {v}" for k, v in stats.items()]
    lines += [f"check at {r['sizes'] or 'fixed sizes'}: ok (max abs diff {r['max_abs']:.3g})" for r in reports]
    lines.append(f"wrote {output}")
    click.echo("\n".join(lines))
