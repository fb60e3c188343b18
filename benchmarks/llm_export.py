"""Export benchmark of ``t2n llm``: the 16-layer 0.85 B Llama saved as a safetensors
checkpoint folder (f32, 3.4 GB), exported by the command as f16 and as Q4_0, each
compared with a raw write of the artifact's bytes in the same run, and its peak resident
memory with the checkpoint's size. Writes the "Export" section of
``benchmarks/RESULTS_LLM.md``.

    python -m benchmarks.llm_export                        # 0.85 B Llama (~10 GB of scratch)
    python -m benchmarks.llm_export --layers 2 --output /tmp/e.md   # a quick try

Each export is the command a user runs, in its own process
(``python -m t2n.cli llm --local-dir CK --export-dirpath OUT --force-module-dtype f16
--no-verify [-c min_max_q4_0]``): its wall time includes the interpreter's start and the
imports, and its peak RSS is the process's own (``VmHWM``), also read after its imports. The raw write puts the same
number of bytes as the artifact from memory into one file (large writes, no fsync, like
the export). Exports and raw writes alternate; each figure is the median of ``--repeats``.
*writing* is the part of the export spent writing the tensors into the archive.

    python -m benchmarks.llm_export --baseline /path/to/older/t2n/checkout

also runs every export with the ``t2n`` of that source tree (rows marked *before*),
alternating with this tree's, so both see the same machine load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.measure import (
    machine_facts,
    raw_write,
    remove,
    replace_section,
    write_safetensors_streaming,
)
from benchmarks.models import llama_config

ROOT = Path(__file__).resolve().parent.parent
GB = 1e9
SECTION = "## Export"


def write_checkpoint(folder: Path, layers: int | None) -> int:
    """The Llama's ``config.json`` and one ``model.safetensors`` written tensor by tensor
    (random weights, never the whole model in memory); returns the shard's size."""
    from transformers import LlamaForCausalLM

    folder.mkdir(parents=True, exist_ok=True)
    config = llama_config(layers)
    config.save_pretrained(str(folder))
    with torch.device("meta"):
        meta = LlamaForCausalLM(config)
    specs = [(n, tuple(p.shape), torch.float32) for n, p in meta.named_parameters()]
    generator = torch.Generator().manual_seed(0)

    def make(name: str, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        if name.endswith("norm.weight"):
            return torch.ones(shape, dtype=dtype)
        return torch.randn(shape, generator=generator, dtype=dtype) * 0.02

    return write_safetensors_streaming(folder / "model.safetensors", specs, make)


CHILD = """
import json, sys, time
start = time.perf_counter()
import torch, transformers, t2n.api, t2n.llm.text.export, t2n.cli.llm
from transformers import AutoConfig, LlamaForCausalLM
from t2n.cli.main import main
def peak():
    return next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmHWM:"))
import t2n.serialize.archive as archive
writing = [0.0]
def timed(add_stream):
    def add(*args, **kwargs):
        t = time.perf_counter()
        try:
            return add_stream(*args, **kwargs)
        finally:
            writing[0] += time.perf_counter() - t
    return add
for kind in vars(archive).values():
    if isinstance(kind, type) and "add_stream" in vars(kind):
        kind.add_stream = timed(kind.add_stream)
imported = time.perf_counter()
imports_rss = peak()
status = main(sys.argv[2:])
done = time.perf_counter()
with open(sys.argv[1], "w") as f:
    json.dump({"status": status, "imports_s": imported - start, "export_s": done - imported,
               "writing_s": writing[0], "imports_rss": imports_rss, "peak_rss": peak()}, f)
"""


def run_export(checkpoint: Path, out: Path, compression: str | None, tree: Path = ROOT) -> dict[str, Any]:
    """One ``t2n llm`` command in its own process, with the ``t2n`` of source ``tree``:
    wall seconds (of the command after the imports, and in all), peak RSS, artifact size."""
    remove(out)
    timings = out.with_suffix(".json")
    command = ["llm", "--local-dir", str(checkpoint), "--export-dirpath", str(out), "--force-module-dtype",
               "f16", "--no-verify"] + (["-c", compression] if compression else [])
    os.sync()
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(timings), *command], cwd=tree,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert child.stderr is not None
    errors = child.stderr.read()
    status = child.wait()
    seconds = time.perf_counter() - start
    if status != 0 or json.loads(timings.read_text())["status"] != 0:
        raise RuntimeError(f"t2n {' '.join(command)} failed:\n{errors.decode()[-3000:]}")
    artifact = out / "model" / "model.nnef.tgz"
    return {"seconds": seconds, **json.loads(timings.read_text()), "artifact_bytes": artifact.stat().st_size}


def measure(checkpoint: Path, scratch: Path, compression: str | None, repeats: int,
            trees: list[tuple[str, Path]]) -> list[dict[str, Any]]:
    """Each tree's export ``repeats`` times (the trees' order alternating), then a raw
    write of the artifact's bytes; one summary per tree."""
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label, _ in trees}
    writes = []
    out = scratch / ("out_q4" if compression else "out_f16")
    for i in range(repeats):
        for label, tree in trees if i % 2 == 0 else trees[::-1]:
            runs[label].append(run_export(checkpoint, out, compression, tree))
        size = runs[trees[0][0]][-1]["artifact_bytes"]
        payload = np.random.default_rng(0).integers(0, 255, size, dtype=np.uint8)
        os.sync()
        seconds, _ = raw_write(scratch / "raw.bin", [memoryview(payload)], sync=False, primed=False)
        writes.append(seconds)
        del payload
        remove(scratch / "raw.bin")
    return [_summary(compression, label, runs[label], writes) for label, _ in trees]


def _summary(compression: str | None, label: str, exports: list[dict[str, Any]], writes: list[float]) -> dict[str, Any]:
    export_s = statistics.median(e["export_s"] for e in exports)
    total_s = statistics.median(e["seconds"] for e in exports)
    writing_s = statistics.median(e["writing_s"] for e in exports)
    write_s = statistics.median(writes)
    return {"compression": (compression or "none (f16)") + label, "export_s": export_s, "raw_write_s": write_s,
            "ratio": export_s / write_s, "writing_s": writing_s, "writing_ratio": writing_s / write_s,
            "total_s": total_s, "total_ratio": total_s / write_s,
            "imports_rss": max(e["imports_rss"] for e in exports), "peak_rss": max(e["peak_rss"] for e in exports),
            "artifact_bytes": exports[-1]["artifact_bytes"], "runs": exports, "raw_writes": writes}


def report(results: dict[str, Any]) -> str:
    size = results["checkpoint_bytes"]
    lines = [SECTION, "",
             f"`python -m benchmarks.llm_export` ({results['layers']}-layer Llama, hidden 2048, vocab 32000, "
             f"checkpoint `model.safetensors` f32 {size / GB:.2f} GB; {results['repeats']} runs each, "
             "median; exports and raw writes alternate in one run). Command: `t2n llm --local-dir CK "
             "--export-dirpath OUT --force-module-dtype f16 --no-verify [-c min_max_q4_0]`, each in its "
             "own process: *export* is the command's time after the imports (torch, transformers, "
             "t2n), *writing* the part of it spent writing the tensors into the archive (reading, "
             "converting or quantizing, compressing, writing), *with start-up* the process's whole "
             "wall time." + (f" Rows marked *before* ran the t2n of `{results['baseline']}`, alternating "
                             "with this tree's." if results.get("baseline") else ""), "",
             "| export | artifact | export | writing | raw write of the same bytes | ratio | writing ratio "
             "| with start-up | ratio | peak RSS | peak RSS / checkpoint | peak RSS above imports / checkpoint |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    floor = max(r["imports_rss"] for r in results["exports"])
    for r in results["exports"]:
        lines.append(
            f"| {r['compression']} | {r['artifact_bytes'] / GB:.2f} GB | {r['export_s']:.1f} s | "
            f"{r['writing_s']:.1f} s | {r['raw_write_s']:.2f} s | {r['ratio']:.1f}x | {r['writing_ratio']:.1f}x | "
            f"{r['total_s']:.1f} s | {r['total_ratio']:.1f}x | "
            f"{r['peak_rss'] / GB:.2f} GB | "
            f"{r['peak_rss'] / size:.1%} | {(r['peak_rss'] - floor) / size:.1%} |")
    lines += ["", f"Imports alone (torch, transformers, t2n) peak at {floor / GB:.2f} GB. The model is "
              "built on the meta device and every weight streams from the shard into the archive, "
              "so the peak does not grow with the checkpoint. The machine was shared with other "
              "jobs while measuring: times are noisy, ratios are of interleaved runs.",
              "", f"Machine: {json.dumps(results['machine'])}", ""]
    return "\n".join(lines)


def write_section(path: Path, section: str) -> None:
    """Replace (or add) the Export section of ``path``, leaving other sections alone."""
    replace_section(path, SECTION, section, "# LLM benchmarks")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=None, help="layers of the Llama (default 16)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--scratch", type=Path, default=Path("/tmp/t2n_llm_export_bench"))
    ap.add_argument("--output", type=Path, default=ROOT / "benchmarks" / "RESULTS_LLM.md")
    ap.add_argument("--keep", action="store_true", help="keep the checkpoint and artifacts")
    ap.add_argument("--baseline", type=Path, default=None,
                    help="another t2n source tree (e.g. a checkout of an older version): its exports "
                         "alternate with this tree's, in rows marked 'before'")
    ap.add_argument("--baseline-label", default=None,
                    help="how the report names the baseline (default: its path), e.g. 't2n 1.2' or a commit")
    ap.add_argument("--checkpoint", type=Path, default=None,
                    help="use this checkpoint folder (made by an earlier run with --keep) instead of writing one")
    args = ap.parse_args()
    args.scratch.mkdir(parents=True, exist_ok=True)
    checkpoint = args.checkpoint or args.scratch / "checkpoint"
    if args.checkpoint is None:
        size = write_checkpoint(checkpoint, args.layers)
    else:
        size = (checkpoint / "model.safetensors").stat().st_size
    trees = [("", ROOT)] + ([(" (before)", args.baseline.resolve())] if args.baseline else [])
    results: dict[str, Any] = {"layers": args.layers or 16, "repeats": args.repeats, "checkpoint_bytes": size,
                               "baseline": (args.baseline_label or str(args.baseline)) if args.baseline else None,
                               "machine": machine_facts(args.scratch)}
    results["exports"] = [row for c in (None, "min_max_q4_0") for row in measure(checkpoint, args.scratch, c,
                                                                                  args.repeats, trees)]
    (args.output.with_suffix(".export.json")).write_text(json.dumps(results, indent=2) + "\n")
    write_section(args.output, report(results))
    print(report(results))
    if not args.keep:
        remove(args.scratch / "out_f16")
        remove(args.scratch / "out_q4")
        if args.checkpoint is None:
            remove(checkpoint)


if __name__ == "__main__":
    main()
