"""Compile time per phase and peak RSS of the benchmark's Llama through each frontend
(``jit``: ``torch.jit.trace``; ``export``: ``torch.export`` then core-ATen decompositions).

    python -m benchmarks.frontends                  # 16 layers, 3 rounds per frontend, a few minutes
    python -m benchmarks.frontends --layers 2 --rounds 1 --output /tmp/f.md   # a quick try

Each compile runs in its own child process (its own peak RSS), the frontends in turns
(jit, export, jit, export...) so that the machine's load falls on both alike; the
figures are the medians of the rounds. The section is written into ``RESULTS.md``
between its marker lines (``python -m benchmarks.run`` writes it too); the raw numbers
go to ``RESULTS_FRONTENDS.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import models

FRONTENDS = ("jit", "export")
PHASES = ("trace", "lowering", "passes", "emission")
BEGIN = "<!-- frontends: written by `python -m benchmarks.frontends` -->"
END = "<!-- end of frontends -->"
GIB = 2**30


def scenario(args: dict[str, Any]) -> dict[str, Any]:
    """Child process: warm up on a tiny model of the same architecture, then compile the
    full one with ``args["frontend"]`` (no saving: writing does not depend on the frontend)."""
    import t2n
    from benchmarks.measure import Phase, rss

    kind, frontend = args["kind"], args["frontend"]
    small = models.build(kind, small=True)
    t2n.compile(small, models.example_args(kind, small), frontend=frontend)
    del small
    results: dict[str, Any] = {"frontend": frontend, "kind": kind, "rss_after_imports": rss()}
    model = models.build(kind, layers=args.get("layers"))
    results["weight_bytes"] = models.weight_bytes(model)
    results["params"] = sum(t.numel() for _, t in models.unique_tensors(model))
    results["rss_after_build"] = rss()
    example = models.example_args(kind, model)
    with Phase(results, "compile"):
        art = t2n.compile(model, example, frontend=frontend)
    results["phases"] = dict(art.stats["timings"])
    results["ops"] = len(art.ir)
    return results


def measure(kind: str, layers: int | None, rounds: int) -> dict[str, Any]:
    """``rounds`` compiles per frontend, interleaved, each in a child process."""
    from benchmarks.measure import child

    out: dict[str, Any] = {"kind": kind, "layers": layers, "rounds": {f: [] for f in FRONTENDS}}
    for _ in range(rounds):
        for frontend in FRONTENDS:
            try:
                r = child({"scenario": "frontend", "kind": kind, "frontend": frontend, "layers": layers})
            except RuntimeError as exc:
                r = {"error": str(exc).splitlines()[0][:300]}
            out["rounds"][frontend].append(r)
    return out


def _median_row(frontend: str, rounds: list[dict[str, Any]]) -> str:
    good = [r for r in rounds if "error" not in r]
    if not good:
        return f"| `{frontend}` | failed: {rounds[0]['error'] if rounds else 'not run'} |" + " |" * 6
    phases = [statistics.median(r["phases"].get(p, 0.0) for r in good) for p in PHASES]
    total = statistics.median(r["compile"]["seconds"] for r in good)
    peak = statistics.median(r["compile"]["peak_rss"] for r in good)
    weights = good[0]["weight_bytes"]
    cells = [f"{s:.2f}" for s in phases] + [f"{total:.2f}", f"{peak / GIB:.2f} GiB ({peak / weights:.2f} x)",
                                            str(good[0]["ops"])]
    return f"| `{frontend}` | " + " | ".join(cells) + " |"


def section(res: dict[str, Any]) -> str:
    """The per-frontend rows, markers included."""
    rounds = res["rounds"]
    first = next((r for rs in rounds.values() for r in rs if "error" not in r), None)
    model = ("a random-init `transformers` LlamaForCausalLM" if res["kind"] == "llama"
             else "the Llama-shaped stand-in")
    size = (f"{first['params'] / 1e9:.3f} B parameters, {first['weight_bytes'] / GIB:.2f} GiB in f32; "
            if first else "")
    lines = [
        BEGIN, "", "## Compile per frontend", "",
        f"`t2n.compile(model, args, frontend=...)` of {model} ({res['layers'] or 16} layers; {size}8 tokens), "
        f"f32, no saving. Each compile in its own process, the frontends in turns; median of "
        f"{max(len(rs) for rs in rounds.values())} round(s). *trace* is `torch.jit.trace` for jit and "
        "`torch.export.export` + `run_decompositions()` for export. Peak RSS is the whole process's "
        "during the compile (the model's weights included), and against the weights.",
        "",
        "| frontend | trace s | lowering s | passes s | emission s | compile s | peak RSS | IR ops |",
        "|---|---|---|---|---|---|---|---|",
        *(_median_row(f, rounds[f]) for f in FRONTENDS),
        "",
        f"Produced by `{res.get('command', 'python -m benchmarks.frontends')}` on {res.get('started', '?')}, "
        f"load average {res.get('load_average', '?')} (other processes share the machine).",
        "", END,
    ]
    return "\n".join(lines) + "\n"


def write_section(path: Path, text: str) -> None:
    doc = path.read_text() if path.exists() else ""
    if BEGIN in doc and END in doc:
        head, rest = doc.split(BEGIN, 1)
        doc = head + text.rstrip("\n") + rest.split(END, 1)[1]
    else:
        marker = "## How to reproduce"
        doc = doc.replace(marker, text + "\n" + marker) if marker in doc else doc + "\n" + text
    path.write_text(doc)


def main() -> None:
    import os

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=None, help="fewer layers, for a quick try")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--kind", default="llama", choices=("llama", "standin"))
    ap.add_argument("--output", type=Path, default=Path(__file__).parent / "RESULTS.md")
    ns = ap.parse_args()
    res = measure(ns.kind, ns.layers, ns.rounds)
    res["command"] = ("python -m benchmarks.frontends " + " ".join(sys.argv[1:])).strip()
    res["started"] = time.strftime("%Y-%m-%d %H:%M")
    res["load_average"] = tuple(round(x, 2) for x in os.getloadavg())
    ns.output.with_name("RESULTS_FRONTENDS.json").write_text(json.dumps(res, indent=1))
    text = section(res)
    write_section(ns.output, text)
    print(text)


if __name__ == "__main__":
    main()
