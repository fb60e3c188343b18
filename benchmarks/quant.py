"""Q4_0 benchmarks: quantize + export of the 0.85 B Llama, and tract's run time of a small
Llama's f32, f16 and Q4_0 artifacts. Writes ``benchmarks/RESULTS_Q4_0.md`` (and ``.json``).

    python -m benchmarks.quant                          # both (a few minutes, ~2 GB of scratch)
    python -m benchmarks.quant --skip-big               # only tract's run times
    python -m benchmarks.quant --layers 2 --output /tmp/q.md   # a quick try

Each scenario runs in its own child process (own peak RSS): ``python -m benchmarks.quant
'{"scenario": ...}'`` prints ``RESULT {json}``.

* ``export``: ``t2n.quantize(model, "min_max_q4_0_with_embeddings")`` then
  ``t2n.export(model, args, "model.nnef.tar", sync=True)``, each timed with its peak RSS;
  then the archive's own bytes are written from memory to one file (large writes, fsync)
  three times: the median is the *raw write of the same Q4_0 bytes* every ratio divides by.
  Peak RSS is compared with the model's f32 weights.
* ``runtime``: a small Llama (hidden 512, 4 layers, vocab 8000) exported as f32, f16 and
  Q4_0 (``min_max_q4_0_with_embeddings``; f32 activations, and f16 ones), loaded in tract
  once, then the prefill of 64 tokens run ``repeats`` times: median and best seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GIB = 2**30
PREFILL = 64
SMALL = dict(hidden=512, intermediate=1408, layers=4, heads=8, kv_heads=2, vocab=8000)


def _export(args: dict[str, Any]) -> dict[str, Any]:
    import torch

    import t2n
    from benchmarks import models
    from benchmarks.measure import Phase, raw_write, remove, rss

    folder = Path(args["folder"])
    small = t2n.quantize(models.build("llama", small=True), "min_max_q4_0_with_embeddings")
    t2n.compile(small, models.example_args("llama", small))  # one-time costs not counted
    out: dict[str, Any] = {"rss_after_imports": rss()}
    model = models.build("llama", layers=args.get("layers"))
    out["weight_bytes"] = models.weight_bytes(model)
    out["params"] = sum(t.numel() for _, t in models.unique_tensors(model))
    out["rss_after_build"] = rss()
    example = models.example_args("llama", model)
    with Phase(out, "quantize"):
        t2n.quantize(model, "min_max_q4_0_with_embeddings")
    with Phase(out, "export"):
        art = t2n.export(model, example, folder / "model.nnef.tar", sync=True, progress=False)
    out["export"]["timings"] = dict(art.stats["timings"])
    del art
    blob = (folder / "model.nnef.tar").read_bytes()
    out["tar_bytes"] = len(blob)
    remove(folder / "model.nnef.tar")
    out["raw"] = [raw_write(folder / "raw.bin", [memoryview(blob)], primed=False)[0] for _ in range(3)]
    remove(folder / "raw.bin")
    out["torch_threads"] = torch.get_num_threads()
    return out


def _small_llama(dtype: Any) -> Any:
    import warnings

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    c = SMALL
    cfg = LlamaConfig(hidden_size=c["hidden"], intermediate_size=c["intermediate"],
                      num_hidden_layers=c["layers"], num_attention_heads=c["heads"],
                      num_key_value_heads=c["kv_heads"], vocab_size=c["vocab"],
                      max_position_embeddings=256, use_cache=False, tie_word_embeddings=False)
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return LlamaForCausalLM(cfg).to(dtype).eval()


def _time_in_tract(path: Path, ids: Any, repeats: int) -> dict[str, float]:
    import numpy as np
    import tract

    t0 = time.perf_counter()
    runnable = tract.nnef().load(str(path)).into_runnable()
    load = time.perf_counter() - t0
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        runnable.run([np.ascontiguousarray(ids)])
        runs.append(time.perf_counter() - t0)
    return {"load": load, "median": statistics.median(runs), "best": min(runs), "runs": runs}


def _runtime(args: dict[str, Any]) -> dict[str, Any]:
    import torch

    import t2n

    folder = Path(args["folder"])
    ids = torch.arange(PREFILL).reshape(1, PREFILL) % SMALL["vocab"]
    base = _small_llama(torch.float32)
    quantized = t2n.quantize(copy.deepcopy(base), "min_max_q4_0_with_embeddings")
    variants = {"f32": base, "f16": copy.deepcopy(base).half(), "q4_0 (f32 activations)": quantized,
                "q4_0 (f16 activations)": copy.deepcopy(quantized).half()}
    out: dict[str, Any] = {"config": SMALL, "prefill": PREFILL}
    for name, model in variants.items():
        path = folder / f"{name.split()[0]}-{len(out)}"
        art = t2n.compile(model, (ids,), t2n.TractNNEF())
        report = art.check("loose")  # f16 logits near zero: relative errors of f16 rounding
        art.save(path)
        size = sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
        out[name] = {"bytes": size, "max_abs_err": report.max_abs,
                     **_time_in_tract(path, ids.numpy(), args.get("repeats", 10))}
        shutil.rmtree(path)
    return out


SCENARIOS = {"export": _export, "runtime": _runtime}


def child(args: dict[str, Any]) -> dict[str, Any]:
    print(f"-- {json.dumps(args)}", file=sys.stderr, flush=True)
    done = subprocess.run([sys.executable, "-m", "benchmarks.quant", json.dumps(args)], cwd=ROOT,
                          stdout=subprocess.PIPE, text=True, timeout=7200)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"scenario {args['scenario']} failed (exit {done.returncode}):\n{done.stdout[-3000:]}")
    return dict(json.loads(lines[-1][len("RESULT "):]))


def report(res: dict[str, Any], command: str) -> str:
    lines = ["# Q4_0 benchmarks", "", f"Produced by `{command}` on {res['started']}; load average "
             f"{res['load'][0]:.1f} at the start, {res['load_end'][0]:.1f} at the end "
             f"({res['cpus']} CPUs; other processes share the machine, which moves every figure).", ""]
    e = res.get("export")
    if e:
        raw = statistics.median(e["raw"])
        q, x = e["quantize"]["seconds"], e["export"]["seconds"]
        peak = max(e["quantize"]["peak_rss"], e["export"]["peak_rss"])
        w = e["weight_bytes"]
        lines += [
            "## Quantize + export of the Llama", "",
            f"{e['params'] / 1e9:.3f} B parameters ({w / GIB:.2f} GiB in f32), "
            "`t2n.quantize(model, \"min_max_q4_0_with_embeddings\")` then `t2n.export(model, args, "
            f"\"model.nnef.tar\", sync=True)`: a {e['tar_bytes'] / GIB:.3f} GiB archive. Raw write of "
            f"those bytes from memory (fsynced): {', '.join(f'{r:.2f}' for r in e['raw'])} s, median "
            f"**{raw:.2f} s**.", "",
            "| step | seconds | ratio to the raw write | peak RSS | peak RSS / f32 weights |",
            "|---|---|---|---|---|",
            f"| `t2n.quantize` | {q:.2f} | {q / raw:.1f} | {e['quantize']['peak_rss'] / GIB:.2f} GiB | "
            f"{e['quantize']['peak_rss'] / w:.3f} |",
            f"| `t2n.export` (Q4_0 packing, compile, write) | {x:.2f} | {x / raw:.1f} | "
            f"{e['export']['peak_rss'] / GIB:.2f} GiB | {e['export']['peak_rss'] / w:.3f} |",
            f"| **both** | **{q + x:.2f}** | **{(q + x) / raw:.1f}** | {peak / GIB:.2f} GiB | {peak / w:.3f} |",
            "", f"Export phases (s): {', '.join(f'{k} {v:.2f}' for k, v in e['export']['timings'].items())}. "
            f"The process held {e['rss_after_imports'] / GIB:.2f} GiB after imports and "
            f"{e['rss_after_build'] / GIB:.2f} GiB with the f32 model built.", ""]
    r = res.get("runtime")
    if r:
        c = r["config"]
        lines += [
            "## tract run time, small Llama", "",
            f"LlamaForCausalLM hidden {c['hidden']}, intermediate {c['intermediate']}, {c['layers']} layers, "
            f"{c['heads']} heads ({c['kv_heads']} kv), vocab {c['vocab']}; prefill of {r['prefill']} tokens in "
            "tract (Python package), after one load; each artifact checked against its PyTorch model first.", "",
            "| artifact | size | load s | run s (median) | best | vs f32 | max abs err vs PyTorch |",
            "|---|---|---|---|---|---|---|"]
        f32 = r["f32"]["median"]
        for name, v in r.items():
            if isinstance(v, dict) and "median" in v:
                lines.append(f"| {name} | {v['bytes'] / 2**20:.1f} MiB | {v['load']:.2f} | {v['median']:.4f} | "
                             f"{v['best']:.4f} | {v['median'] / f32:.2f} | {v['max_abs_err']:.2e} |")
        lines.append("")
    lines += ["## How to reproduce", "", f"`{command}`", ""]
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) == 2 and sys.argv[1].startswith("{"):
        args = json.loads(sys.argv[1])
        print("RESULT " + json.dumps(SCENARIOS[args["scenario"]](args)), flush=True)
        return
    import os

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", type=Path, default=ROOT.parent / "t2n-bench-tmp")
    ap.add_argument("--output", type=Path, default=ROOT / "benchmarks" / "RESULTS_Q4_0.md")
    ap.add_argument("--layers", type=int, default=None, help="fewer Llama layers, for a quick try")
    ap.add_argument("--skip-big", action="store_true", help="only tract's run times")
    ap.add_argument("--repeats", type=int, default=10)
    ns = ap.parse_args()
    command = ("python -m benchmarks.quant " + " ".join(sys.argv[1:])).strip()
    folder = ns.dir / f"q4_0-{int(time.time())}"
    folder.mkdir(parents=True, exist_ok=True)
    res: dict[str, Any] = {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "load": os.getloadavg(),
                           "cpus": os.cpu_count()}
    try:
        res["runtime"] = child({"scenario": "runtime", "folder": str(folder), "repeats": ns.repeats})
        if not ns.skip_big:
            res["export"] = child({"scenario": "export", "folder": str(folder), "layers": ns.layers})
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        with contextlib.suppress(OSError):
            ns.dir.rmdir()
    res["load_end"] = os.getloadavg()
    ns.output.with_suffix(".json").write_text(json.dumps(res, indent=1))
    ns.output.write_text(report(res, command) + kept_sections(ns.output))
    print(ns.output.read_text())


KEEP = "<!-- benchmarks.quant replaces everything above this line and keeps what follows -->"


def kept_sections(path: Path) -> str:
    """What other benchmarks wrote below :data:`KEEP` in ``path`` (and the line itself)."""
    old = path.read_text() if path.exists() else ""
    return "\n" + KEEP + old.split(KEEP, 1)[1] if KEEP in old else "\n" + KEEP + "\n"


if __name__ == "__main__":
    main()
