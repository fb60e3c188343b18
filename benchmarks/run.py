"""Run the export benchmarks and write ``benchmarks/RESULTS.md``.

    python -m benchmarks.run                      # the full suite (about 10-15 minutes)
    python -m benchmarks.run --dir /mnt/fast/tmp  # benchmark another disk
    python -m benchmarks.run --layers 2 --skip-bigger --output /tmp/r.md   # a quick try

Every scenario runs in its own child process (its own peak RSS) and writes to a
folder under ``--dir`` that is deleted at the end. Every figure is a ratio to the raw
write of the same bytes to the same disk in the same run (large sequential writes of
the weights from memory, then fsync; measured several times, the median is used).
All writes, raw ones included, are fsynced before their clock stops, and each timed step
starts on an idle disk (``os.sync()`` first, not timed).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import frontends
from benchmarks.measure import child, machine_facts

ROOT = Path(__file__).resolve().parent.parent
GIB = 2**30


def gib(n: float) -> str:
    return f"{n / GIB:.2f} GiB"


def run(folder: Path, layers: int | None, skip_bigger: bool, bigger_layers: int) -> dict[str, Any]:
    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {"facts": machine_facts(folder), "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    problem = child({"scenario": "probe", "folder": str(folder)})["llama_problem"]
    kind = "standin" if problem else "llama"
    out["kind"], out["llama_problem"] = kind, problem
    common = {"folder": str(folder), "kind": kind, "layers": layers}
    t0 = time.perf_counter()
    out["scaling"] = child({"scenario": "scaling", "kind": kind, "folder": str(folder),
                            "layers_list": [4, 8, 16, 32, 64]})
    out["f32"] = child({"scenario": "llm", "dtype": "f32", "dat": True, "parallel": True, "tgz": True,
                        "compressors": True, "checkpoints": True, **common})
    out["from_safetensors"] = child({"scenario": "from_disk", "folder": str(folder),
                                     "source": str(folder / "model.safetensors")})
    out["from_pt"] = child({"scenario": "from_disk", "folder": str(folder), "source": str(folder / "model.pt")})
    (folder / "model.pt").unlink()
    out["meta_f32"] = child({"scenario": "meta_export", "weights": str(folder / "model.safetensors"), **common})
    (folder / "model.safetensors").unlink()
    out["f16"] = child({"scenario": "llm", "dtype": "f16", **common})
    if not skip_bigger:
        out["bigger"] = child({"scenario": "meta_export", **common, "layers": bigger_layers})
    out["frontends"] = frontends.measure(kind, layers, rounds=3)
    out["seconds"] = time.perf_counter() - t0
    out["facts"]["load_average_end"] = machine_facts(folder)["load_average"]
    return out


# -- report -------------------------------------------------------------------------


RAW_KEYS = ("raw_before", "raw_middle", "raw_after")


def _raws(r: dict[str, Any]) -> list[float]:
    """Every warm (primed) raw write of the run: before, between and after the other
    scenarios, and one per warm export round."""
    return [r[k]["seconds"] for k in RAW_KEYS if k in r] + [x["raw"]["seconds"] for x in r.get("warm_rounds", [])]


def _raw(r: dict[str, Any]) -> float:
    """The reference: the median of the run's warm raw writes (the disk's outliers, in
    both directions, do not move it)."""
    return statistics.median(_raws(r))


def report(res: dict[str, Any], command: str) -> str:
    f, f32 = res["facts"], res["f32"]
    size = f32["weight_bytes"]
    raws = _raws(f32)
    raw = _raw(f32)
    speed = size / raw
    lines = [
        "# Export benchmarks",
        "",
        f"Produced by `{command}` on {res['started']} (suite: {res['seconds']:.0f} s).",
        "",
        "## Machine",
        "",
        f"* CPU: {f.get('cpu', '?')}, {f['cpus']} cores; RAM {f.get('ram_gib', '?')} GiB",
        f"* Disk: {f.get('filesystem', '?')}, {f['disk_free_gib']} GiB free at the start",
        f"* Load average at start {tuple(round(x, 2) for x in f['load_average'])}, at end "
        f"{tuple(round(x, 2) for x in f['load_average_end'])} (other processes share the machine)",
        f"* Python {f['python']}, torch {f['torch']}, numpy {f.get('numpy')}, isal {f.get('isal')}, "
        f"zlib-ng {f.get('zlib_ng')}, transformers {f.get('transformers')}",
        "",
        "## Model",
        "",
    ]
    if res["kind"] == "llama":
        lines.append("A random-init `transformers` LlamaForCausalLM (hidden 2048, intermediate 5632, "
                     "16 layers, 16 heads, 4 kv heads, vocab 32000).")
    else:
        lines += [
            "**Stand-in**: t2n cannot lower `transformers`' Llama yet "
            f"({res['llama_problem']}), so the suite exports a Llama-shaped model built from ops "
            "t2n lowers (`benchmarks/models.py`: same parameter names, shapes and count; RMSNorm "
            "from pow/mean/rsqrt, grouped-query attention from matmul/softmax/expand, SiLU-gated MLP, "
            "embedding as one-hot rows times the table, stored transposed so that PyTorch's f16 kernel "
            "is not 100x slower). Serializer and memory figures are those of the real model; the graph "
            "is a little simpler (no rotary embedding, no attention mask).",
        ]
    lines += [
        "",
        f"{f32['params'] / 1e9:.3f} B parameters, {gib(size)} in f32, {f32['ops']} IR ops "
        f"after passes, {f32['tensors']} tensors. Example input: {8} tokens.",
        "",
        "## Raw write (the reference)",
        "",
        f"The weights' own bytes written from memory to one file with 64 MiB writes, then fsync, "
        f"{len(raws)} times (before, between and after the other scenarios, and one per export round "
        f"below): {', '.join(f'{x:.2f}' for x in raws)} s; median **{raw:.2f} s = {speed / GIB:.2f} GiB/s**. "
        "Ratios below divide by this median (f16 ones by the f16 run's own raw writes).",
        "",
        "Every timed step, these included, starts on an idle disk (`os.sync()`, not timed) and on "
        "*warm* memory: this virtual machine hands memory the guest freed a few seconds earlier "
        "back to its host, and a write that needs such memory as page cache waits for the host to "
        "provide it again (`write()` of 1.6 GiB: 4-5 s on cold memory, 0.4 s on warm; the fsync "
        "after it ~0.65 s either way). So before each timed step the same bytes are written to a "
        "scratch file and deleted (not timed): raw writes and exports are compared in the "
        "machine's fast state, the hard case for an export whose compile runs beside the "
        "writing. The headline export is also measured cold.",
        "",
        "## f32 model: writing",
        "",
        "| what | seconds | ratio to raw | peak RSS | peak RSS / weights |",
        "|---|---|---|---|---|",
    ]

    def row(name: str, seconds: float, peak: int | None, base: float = raw, weights: int = size) -> str:
        p = f"{gib(peak)} | {peak / weights:.2f}" if peak else "- | -"
        return f"| {name} | {seconds:.2f} | {seconds / base:.2f} | {p} |"

    lines.append(row("raw write (median)", raw, None))
    lines.append(row("`.dat` files (`t2n.export_tensors_to_nnef`, one writer)", f32["dat"]["seconds"], f32["dat"]["peak_rss"]))
    if "dat_threads" in f32:
        for n, s in f32["dat_threads"].items():
            lines.append(row(f"`.dat` files with {n} writer thread(s) (`write_dat` in a pool)", s, None))
    lines.append(row("from `.safetensors` (`t2n.export_tensors_from_disk_to_nnef`)",
                     res["from_safetensors"]["export"]["seconds"], res["from_safetensors"]["export"]["peak_rss"]))
    lines.append(row("from `.pt` (zip, memory-mapped)", res["from_pt"]["export"]["seconds"],
                     res["from_pt"]["export"]["peak_rss"]))
    lines.append(row("`.tar` (`Artifact.save`)", f32["save_tar"]["seconds"], f32["save_tar"]["peak_rss"]))
    if "save_tgz" in f32:
        lines.append(row(f"`.tgz` (`Artifact.save`, {f32.get('compressor')}, ratio "
                         f"{f32['tgz_bytes'] / f32['tar_bytes']:.3f})", f32["save_tgz"]["seconds"],
                         f32["save_tgz"]["peak_rss"]))
    lines += [
        "",
        f"Peak RSS of the from-disk exports is against the checkpoint's size ({gib(res['from_safetensors']['source_bytes'])}); "
        f"the largest tensor is {gib(res['from_safetensors']['largest_tensor_bytes'])} and the process holds "
        f"{gib(res['from_safetensors']['rss_after_imports'])} after importing torch and t2n.",
        "",
    ]
    f16 = res["f16"]
    lines += _overlapped_export(f32, f16)
    lines += _full_export("f32", f32, raw)
    lines += _full_export("f16", f16, _raw(f16))
    meta = res["meta_f32"]
    lines += [
        "## Weights from disk (meta device)",
        "",
        "The same model built on the meta device (no weight in memory), exported with "
        "`t2n.compile(model, args, weights_from=\"model.safetensors\")` and saved as `.tar`: "
        "the weights stream from the safetensors file into the archive.",
        "",
        "| model | weights | compile s | save s | total / raw | peak RSS | peak RSS / weights | interpreter before export "
        "| raw write here s | `t2n.export` s | export / raw here | export peak RSS / weights |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in (("above", meta), *([("bigger", res["bigger"])] if "bigger" in res else [])):
        w = r["weights_file_bytes"]
        peak = max(r["compile"]["peak_rss"], r["save_tar"]["peak_rss"])
        label = (f"{r['params'] / 1e9:.2f} B f32 (the model above)" if name == "above" else
                 f"{r['params'] / 1e9:.2f} B f32, {r.get('layers', '?')} layers")
        lines.append(f"| {label} | {gib(w)} | {r['compile']['seconds']:.2f} | {r['save_tar']['seconds']:.2f} | "
                     f"{r['total_seconds'] / (w / speed):.2f} | {gib(peak)} | {peak / w:.3f} | "
                     f"{gib(r['rss_after_imports'])} | {_export_cells(r, w)}")
    lines += [
        "",
        "`total / raw` divides by the raw-write time of that many bytes at the f32 run's raw speed; "
        "the last four columns are `t2n.export(model, args, path, weights_from=...)` (the file's tensors "
        "streamed into the archive while the model compiles) against a raw write of as many bytes "
        "made just before it.",
        "",
    ]
    sc = res.get("scaling")
    if sc:
        lines += [
            "## Compile time against depth",
            "",
            "The same architecture with narrow layers (hidden 64, vocab 100), traced on the meta "
            "device (no PyTorch compute), compiled at several depths. Seconds, and seconds per layer:",
            "",
            "| layers | IR ops | trace | lowering | passes | emission | total | total per layer (ms) |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for n, v in sc.items():
            lines.append(f"| {n} | {v['ops']} | {v['trace']:.3f} | {v['lowering']:.3f} | {v['passes']:.3f} | "
                         f"{v['emission']:.3f} | {v['total']:.3f} | {1000 * v['total'] / int(n):.1f} |")
        lines += ["", "A constant cost per layer means every phase is linear in the number of layers.", ""]
    comp = f32.get("compressors")
    if comp:
        lines += [
            "## gzip implementations on the model's bytes",
            "",
            f"The first {comp['sample_mib']} MiB of the f32 weights, compressed in 4 MiB pieces (gzip stream):",
            "",
            "| implementation | MiB/s of input | output / input |",
            "|---|---|---|",
        ]
        for k, v in comp.items():
            if isinstance(v, dict):
                lines.append(f"| {k} | {v['mib_s']:.0f} | {v['ratio']:.3f} |")
        single = {k: v for k, v in comp.items() if isinstance(v, dict) and "thread" not in k}
        best = max(single, key=lambda k: single[k]["mib_s"] / 2**20 - single[k]["ratio"])
        lines += [
            "",
            f"`.tgz` files are written with {f32.get('compressor')} (`t2n.serialize.archive.threaded_gzip`: "
            "ISA-L at level 1 for t2n's default level 6, 1 MiB blocks compressed on one thread per CPU, "
            "each primed with the 32 KiB before it; the same bytes whatever the number of threads). "
            f"Fastest single stream here: {best}. ISA-L levels 1-2 compress weights as well as zlib "
            "level 6 at many times its speed; ISA-L level 3 is slower for nothing; zlib-ng at level 1 "
            "makes weights larger than they are.",
            "",
        ]
    from benchmarks.artifact_speed import results_section

    lines += results_section()
    if "frontends" in res:
        lines += frontends.section(res["frontends"]).splitlines() + [""]
    lines += [
        "## How to reproduce",
        "",
        f"`{command}` (run it on a quiet machine: other processes change every figure). "
        "Needs about 12 GB free under `--dir` (default: a folder next to the repository, deleted at the end).",
        "",
    ]
    return "\n".join(lines)


def _export_cells(r: dict[str, Any], weights: int) -> str:
    if "export" not in r or "raw" not in r:
        return "- | - | - | - |"
    e, raw = r["export"], r["raw"]["seconds"]
    return f"{raw:.2f} | {e['seconds']:.2f} | {e['seconds'] / raw:.2f} | {e['peak_rss'] / weights:.3f} |"


def _overlapped_export(f32: dict[str, Any], f16: dict[str, Any]) -> list[str]:
    """The headline: ``t2n.export`` (weights written while the model compiles), in rounds
    of one raw write then one export, warm then cold."""
    rows = [
        "## Full export with `t2n.export(model, args, \"model.nnef.tar\")`",
        "",
        "One call: a thread writes the model's parameters into the archive while the model is "
        "traced, lowered and passed over; what the compiled artifact does not hold exactly as "
        "written is taken back, then the rest and `graph.nnef` are written (fsynced). The archive "
        "is byte for byte what `compile` then `save` writes. Rounds of one raw write then one "
        "export of the same bytes: *warm* rounds (both primed, see above), then *cold* rounds "
        "(both after 12 s idle, so their memory comes back from the host).",
        "",
        "| model | weights | memory | rounds | raw writes s | exports s | **export / raw, median of the "
        "rounds** | median export / median raw | worst round | trace | lowering | passes | emission | "
        "writing after compile | written during compile | peak RSS / weights | export's own peak / weights |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    verdicts = []
    for label, r in (("f32", f32), ("f16", f16)):
        size = r["weight_bytes"]
        for mode in ("warm", "cold"):
            rounds = r.get(f"{mode}_rounds", [])
            if not rounds:
                continue
            raws = [x["raw"]["seconds"] for x in rounds]
            runs = [x["export"] for x in rounds]
            exports = [x["seconds"] for x in runs]
            paired = [e / w for e, w in zip(exports, raws)]
            ratio = statistics.median(paired)
            of_medians = statistics.median(exports) / statistics.median(raws)
            worst = max(paired)

            def avg(key: str, runs: list[dict[str, Any]] = runs) -> float:
                return sum(x["timings"].get(key, 0.0) for x in runs) / len(runs)

            early = sum(x["overlap"]["kept_bytes"] for x in runs) / len(runs) / size
            taken_back = sum(x["overlap"]["written_early"] - x["overlap"]["kept"] for x in runs)
            peak = max(x["peak_rss"] for x in runs)
            own = max(x["peak_rss"] - x["rss_before"] for x in runs)
            rows.append(
                f"| {label} | {gib(size)} | {mode} | {len(rounds)} | {', '.join(f'{x:.2f}' for x in raws)} | "
                f"{', '.join(f'{x:.2f}' for x in exports)} | **{ratio:.2f}** | {of_medians:.2f} | {worst:.2f} | {avg('trace'):.2f} | "
                f"{avg('lowering'):.2f} | {avg('passes'):.2f} | {avg('emission'):.2f} | {avg('save'):.2f} | "
                f"{100 * early:.0f}% | {peak / size:.3f} | {(own + size) / size:.3f} |")
            verdicts.append((label, mode, ratio, of_medians, worst, peak / size, (own + size) / size,
                             r["rss_after_imports"], size, taken_back, len(rounds)))
    rows += [
        "",
        "Each round is a raw write then an export, one after the other, so both meet the same disk: "
        "the headline is the median of the rounds' ratios (this disk also switches between two "
        "speeds, about 1.3 and 0.75 GiB/s for f32, which moves a ratio of medians by whichever "
        "speed each sample met). "
        "Phases in seconds (means over the rounds); *writing after compile* is what remains once the "
        "compile is done. *Peak RSS / weights* is the whole process (Python, torch, transformers and "
        "the model included); *export's own peak / weights* is (weights + what the export added to "
        "the process's RSS at its peak) / weights.",
        "",
    ]
    for label, mode, ratio, of_medians, worst, whole, own, interp, size, taken_back, n in verdicts:
        rows.append(
            f"* {label}, {mode}: export **{ratio:.2f} x raw** (median of {n} rounds; median export / median "
            f"raw {of_medians:.2f}; worst round {worst:.2f}; "
            f"target <= 1.5; {taken_back} member(s) taken back); peak RSS {whole:.3f} x the weights for the "
            f"whole process, of which {gib(interp)} ({interp / size:.3f} x) is Python with torch, "
            f"transformers and t2n imported before the model exists; the export itself adds "
            f"{own - 1:.3f} x (target <= 1.15 x in all: {own:.3f} x).")
    rows.append("")
    return rows


def _full_export(label: str, r: dict[str, Any], raw: float) -> list[str]:
    size = r["weight_bytes"]
    rows = [
        f"## Compile, then save, {label}: `t2n.compile` then `Artifact.save(\"model.nnef.tar\")`",
        "",
        f"{gib(size)} of weights; raw write of them {raw:.2f} s (median of {', '.join(f'{x:.2f}' for x in _raws(r))}). "
        "*Default*: `t2n.compile(model, args)`, whose trace runs PyTorch's forward pass once (its "
        "outputs are the reference of `check()`). *No forward*: the same export with the model's "
        "structure on the meta device and `weights_from=` the model's own tensors (by reference), "
        "so the trace computes nothing and no reference outputs are kept.",
        "",
        "| phase | default s | ratio to raw | no forward s | ratio to raw |",
        "|---|---|---|---|---|",
    ]
    ph, ph2 = r["phases"], r.get("phases_no_forward", {})
    for k in ("trace", "lowering", "passes", "emission"):
        if k in ph:
            b = f"{ph2[k]:.2f} | {ph2[k] / raw:.3f}" if k in ph2 else "- | -"
            rows.append(f"| {k} | {ph[k]:.2f} | {ph[k] / raw:.3f} | {b} |")

    def rest(compile_s: float, phases: dict[str, float]) -> float:
        return compile_s - sum(phases.get(k, 0.0) for k in ("trace", "lowering", "passes", "emission"))

    totals = []
    for c, sv, phs in (("compile", "save_tar", ph), ("compile_no_forward", "save_tar_no_forward", ph2)):
        if c in r:
            totals.append((rest(r[c]["seconds"], phs), r[sv]["seconds"], r[c]["seconds"] + r[sv]["seconds"],
                           max(r[c]["peak_rss"], r[sv]["peak_rss"])))
    if len(totals) == 1:
        totals.append((float("nan"),) * 3 + (0,))
    (o1, s1, t1, p1), (o2, s2, t2, p2) = totals
    rows += [
        f"| rest of compile (argument checks, reference outputs, weight lookup) | {o1:.2f} | {o1 / raw:.3f} | {o2:.2f} | {o2 / raw:.3f} |",
        f"| tensor writing (`.tar`, fsynced) | {s1:.2f} | {s1 / raw:.2f} | {s2:.2f} | {s2 / raw:.2f} |",
        f"| **total** | **{t1:.2f}** | **{t1 / raw:.2f}** | **{t2:.2f}** | **{t2 / raw:.2f}** |",
        "",
        f"Target: total <= 1.5 x raw. Peak RSS: default {gib(p1)} = **{p1 / size:.3f} x the weights**, "
        f"no forward {gib(p2)} = **{p2 / size:.3f} x** (target <= 1.15). Of that, "
        f"{gib(r['rss_after_imports'])} is the interpreter with torch and t2n loaded (before the model "
        f"exists); without it the export holds {(p1 - r['rss_after_imports']) / size:.3f} x (default) and "
        f"{(p2 - r['rss_after_imports']) / size:.3f} x (no forward) the weights. The process holds "
        f"{gib(r['rss_after_build'])} once the model is built.",
        "",
    ]
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", type=Path, default=ROOT.parent / "t2n-bench-tmp",
                    help="folder for the files written (created, then deleted)")
    ap.add_argument("--output", type=Path, default=ROOT / "benchmarks" / "RESULTS.md")
    ap.add_argument("--layers", type=int, default=None, help="fewer layers, for a quick try")
    ap.add_argument("--skip-bigger", action="store_true", help="skip the bigger-than-memory model")
    ap.add_argument("--bigger-layers", type=int, default=28, help="layers of the bigger model (28: 5.2 GiB)")
    ns = ap.parse_args()
    command = "python -m benchmarks.run " + " ".join(sys.argv[1:])
    folder = ns.dir / f"run-{int(time.time())}"
    try:
        res = run(folder, ns.layers, ns.skip_bigger, ns.bigger_layers)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        with contextlib.suppress(OSError):
            ns.dir.rmdir()  # only if empty
    (ns.output.with_suffix(".json")).write_text(json.dumps(res, indent=1))
    ns.output.write_text(report(res, command.strip()))
    print(ns.output.read_text())


if __name__ == "__main__":
    main()
