"""One benchmark scenario per child process (so that each has its own peak RSS):
``python -m benchmarks.scenarios '{"scenario": "llm", ...}'`` prints ``RESULT {json}``.

Every write is flushed to the disk (fsync) before its clock stops, the raw writes
included, so that all figures are disk figures, not page-cache ones; and every timed
step starts once the disk has written out what earlier steps left (``os.sync()``,
not timed).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch

from benchmarks import frontends, models
from benchmarks.measure import (
    Phase,
    quiesce,
    raw_write,
    remove,
    reset_peak,
    rss,
    set_primer,
    settle_cold,
    tensor_bytes,
    write_safetensors_streaming,
)

COMPRESSION_SAMPLE = 128 << 20


def _dtype(name: str) -> torch.dtype:
    return {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[name]


def _raw(folder: Path, model: torch.nn.Module, results: dict[str, Any], key: str, cold: bool = False) -> None:
    buffers = [tensor_bytes(t) for _, t in models.unique_tensors(model)]
    if cold:
        settle_cold()
    seconds, n = raw_write(folder / "raw.bin", buffers, primed=not cold, settle=not cold)
    results[key] = {"seconds": seconds, "bytes": n}
    remove(folder / "raw.bin")


def _export(folder: Path, model: torch.nn.Module, example: Any, results: dict[str, Any], key: str,
            cold: bool = False) -> None:
    """``t2n.export`` to ``.tar`` (weights written while compiling), fsynced; its phases,
    peak RSS, and how much was written during the compile."""
    import t2n

    before = rss()
    with Phase(results, key, cold=cold):
        art = t2n.export(model, example, folder / "model.nnef.tar", sync=True, progress=False)
    results[key].update(rss_before=before, timings=dict(art.stats["timings"]), overlap=dict(art.stats["overlap"]))
    del art
    remove(folder / "model.nnef.tar")


def _compressors(model: torch.nn.Module) -> dict[str, Any]:
    """Throughput (MiB/s of input) and ratio of gzip implementations on model bytes."""
    sample = bytearray()
    for _, t in models.unique_tensors(model):
        if len(sample) >= COMPRESSION_SAMPLE:
            break
        b = tensor_bytes(t)
        sample += b[: COMPRESSION_SAMPLE - len(sample)]
    data = memoryview(sample)
    step = 4 << 20
    out: dict[str, Any] = {"sample_mib": len(data) >> 20}

    def stream(name: str, make: Any) -> None:
        c = make()
        t0 = time.perf_counter()
        n = sum(len(c.compress(data[i : i + step])) for i in range(0, len(data), step)) + len(c.flush())
        dt = time.perf_counter() - t0
        out[name] = {"mib_s": len(data) / 2**20 / dt, "ratio": n / len(data)}

    stream("zlib level 1", lambda: zlib.compressobj(1, zlib.DEFLATED, 31))
    stream("zlib level 6", lambda: zlib.compressobj(6, zlib.DEFLATED, 31))
    try:
        from zlib_ng import zlib_ng

        stream("zlib-ng level 1", lambda: zlib_ng.compressobj(1, zlib_ng.DEFLATED, 31))
        stream("zlib-ng level 6", lambda: zlib_ng.compressobj(6, zlib_ng.DEFLATED, 31))
    except ImportError:
        pass
    try:
        from isal import igzip_threaded, isal_zlib

        for lv in (1, 2, 3):
            stream(f"isal level {lv}", lambda lv=lv: isal_zlib.compressobj(lv, isal_zlib.DEFLATED, 31))
        from t2n.serialize.archive import gzip_threads

        tmp = Path(os.environ.get("T2N_BENCH_DIR", "/tmp")) / "threaded.gz"
        n = gzip_threads()
        t0 = time.perf_counter()
        with igzip_threaded.open(tmp, "wb", compresslevel=1, threads=n) as f:
            for i in range(0, len(data), step):
                f.write(data[i : i + step])
        dt = time.perf_counter() - t0
        out[f"isal level 1, {n} threads (what .tgz uses)"] = {
            "mib_s": len(data) / 2**20 / dt, "ratio": tmp.stat().st_size / len(data)}
        tmp.unlink()
    except ImportError:
        pass
    return out


def _parallel_dat(folder: Path, model: torch.nn.Module, threads: int) -> float:
    """Write the .dat files with ``threads`` writers (fsync each): do parallel writers help?"""
    from t2n.serialize.dat import write_dat
    from t2n.serialize.tensors import tensor_file_name
    from t2n.torch_data import tensor_data

    out = folder / f"dat_{threads}"
    out.mkdir()
    items = list(models.unique_tensors(model))
    quiesce()
    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda kv: write_dat(out / tensor_file_name(kv[0]), tensor_data(kv[1]), sync=True), items))
    dt = time.perf_counter() - t0
    remove(out)
    return dt


def warm_up(kind: str, dtype: str = "f32") -> None:
    """Export a tiny model of the same architecture, from memory and from the meta
    device, so that one-time costs (imports, PyTorch's meta kernels) are not counted."""
    import t2n

    small = models.build(kind, dtype=_dtype(dtype), small=True)
    t2n.compile(small, models.example_args(kind, small))
    try:
        structure = models.build(kind, dtype=_dtype(dtype), small=True, device="meta")
        models.materialize_buffers(kind, structure)
        t2n.compile(structure, models.example_args(kind, structure), weights_from=dict(models.unique_tensors(small)))
    except Exception as exc:  # reported by the scenario that needs it
        logging.warning("meta-device export of %s failed: %s", kind, exc)


def llm(args: dict[str, Any]) -> dict[str, Any]:
    import t2n

    folder = Path(args["folder"])
    kind, dtype = args["kind"], args["dtype"]
    warm_up(kind, dtype)
    results: dict[str, Any] = {"kind": kind, "dtype": dtype, "rss_after_imports": rss()}
    t0 = time.perf_counter()
    model = models.build(kind, dtype=_dtype(dtype), layers=args.get("layers"))
    results["build_seconds"] = time.perf_counter() - t0
    results["weight_bytes"] = models.weight_bytes(model)
    results["params"] = sum(t.numel() for _, t in models.unique_tensors(model))
    results["rss_after_build"] = rss()
    example = models.example_args(kind, model)
    set_primer([tensor_bytes(t) for _, t in models.unique_tensors(model)], folder)

    _raw(folder, model, results, "raw_before")
    # the headline: raw writes and exports in turns, warm (primed) then cold
    for mode, n in (("warm", args.get("warm_rounds", 7)), ("cold", args.get("cold_rounds", 2))):
        rounds: list[dict[str, Any]] = []
        for _ in range(n):
            r: dict[str, Any] = {}
            _raw(folder, model, r, "raw", cold=mode == "cold")
            _export(folder, model, example, r, "export", cold=mode == "cold")
            rounds.append(r)
        results[f"{mode}_rounds"] = rounds
    if args.get("dat"):
        with Phase(results, "dat"):
            t2n.export_tensors_to_nnef(dict(models.unique_tensors(model)), folder / "dat", sync=True, progress=False)
        remove(folder / "dat")
    if args.get("parallel"):
        results["dat_threads"] = {str(n): _parallel_dat(folder, model, n) for n in (1, 2)}

    with Phase(results, "compile"):
        art = t2n.compile(model, example)
    results["phases"] = dict(art.stats["timings"])
    results["ops"] = len(art.ir)
    results["tensors"] = len(art.rendered.tensors)
    with Phase(results, "save_tar"):
        art.save(folder / "model.nnef.tar", sync=True, progress=False)
    results["tar_bytes"] = (folder / "model.nnef.tar").stat().st_size
    remove(folder / "model.nnef.tar")
    _raw(folder, model, results, "raw_middle")
    if args.get("tgz"):
        with Phase(results, "save_tgz"):
            art.save(folder / "model.nnef.tgz", sync=True, progress=False)
        results["tgz_bytes"] = (folder / "model.nnef.tgz").stat().st_size
        results["compressor"] = art.stats.get("compressor")
        remove(folder / "model.nnef.tgz")
    del art

    # The same export without PyTorch's forward pass: the structure traced on the meta
    # device, the weights given by reference (weights_from=the model's own tensors).
    try:
        with Phase(results, "compile_no_forward"):
            structure = models.build(kind, dtype=_dtype(dtype), device="meta", layers=args.get("layers"))
            models.materialize_buffers(kind, structure)
            art = t2n.compile(structure, models.example_args(kind, structure),
                              weights_from=dict(models.unique_tensors(model)))
        results["phases_no_forward"] = dict(art.stats["timings"])
        with Phase(results, "save_tar_no_forward"):
            art.save(folder / "model.nnef.tar", sync=True, progress=False)
        remove(folder / "model.nnef.tar")
        del art
    except Exception as exc:
        results.pop("compile_no_forward", None)
        results["no_forward_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"

    if args.get("compressors"):
        results["compressors"] = _compressors(model)
    _raw(folder, model, results, "raw_after")
    if args.get("checkpoints"):
        state = dict(models.unique_tensors(model))
        specs = [(n, tuple(t.shape), t.dtype) for n, t in state.items()]
        write_safetensors_streaming(folder / "model.safetensors", specs, lambda n, s, d: state[n])
        torch.save({n: t.contiguous() for n, t in state.items()}, folder / "model.pt")
    return results


def from_disk(args: dict[str, Any]) -> dict[str, Any]:
    import t2n

    folder, source = Path(args["folder"]), Path(args["source"])
    results: dict[str, Any] = {"source": source.name, "source_bytes": source.stat().st_size,
                               "rss_after_imports": rss()}
    with Phase(results, "export"):
        written = t2n.export_tensors_from_disk_to_nnef(source, folder / "from_disk", sync=True, progress=False)
    results["tensors"] = len(written)
    results["largest_tensor_bytes"] = max(w.nbytes for w in written.values())
    remove(folder / "from_disk")
    return results


def meta_export(args: dict[str, Any]) -> dict[str, Any]:
    """A model built on the meta device, exported with weights streamed from a file."""
    import t2n

    folder, kind = Path(args["folder"]), args["kind"]
    warm_up(kind)
    results: dict[str, Any] = {"kind": kind, "rss_after_imports": rss(), "layers": args.get("layers")}
    layers = args.get("layers")
    source = Path(args["weights"]) if args.get("weights") else folder / "big.safetensors"
    if not args.get("weights"):
        meta = models.build(kind, device="meta", layers=layers)
        specs = [(n, tuple(t.shape), t.dtype) for n, t in models.unique_tensors(meta)]
        gen = torch.Generator().manual_seed(0)

        def make(name: str, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
            if name.endswith("norm.weight"):
                return torch.ones(shape, dtype=dtype)
            return (torch.randn(shape, generator=gen) * 0.02).to(dtype)

        with Phase(results, "write_checkpoint"):
            write_safetensors_streaming(source, specs, make)
        del meta
    results["weights_file_bytes"] = source.stat().st_size
    reset_peak()
    with Phase(results, "compile"):
        model = models.build(kind, device="meta", layers=layers)
        models.materialize_buffers(kind, model)
        example = models.example_args(kind, model)
        art = t2n.compile(model, example, weights_from=source)
    results["params"] = sum(t.numel() for _, t in models.unique_tensors(model))
    results["phases"] = dict(art.stats["timings"])
    with Phase(results, "save_tar"):
        art.save(folder / "meta.nnef.tar", sync=True, progress=False)
    results["total_seconds"] = results["compile"]["seconds"] + results["save_tar"]["seconds"]
    results["tar_bytes"] = (folder / "meta.nnef.tar").stat().st_size
    remove(folder / "meta.nnef.tar")
    # the same with t2n.export (weights streamed from the file while compiling), and a
    # raw write of as many bytes right before it, as this scenario's own reference
    block = memoryview(bytearray(64 << 20))
    n = results["weights_file_bytes"]
    blocks = [block] * (n // len(block)) + [block[: n % len(block)]]
    set_primer(blocks, folder)
    seconds, _ = raw_write(folder / "raw.bin", blocks)
    results["raw"] = {"seconds": seconds, "bytes": n}
    remove(folder / "raw.bin")
    before = rss()
    with Phase(results, "export"):
        art = t2n.export(model, example, folder / "meta.nnef.tar", weights_from=source, sync=True, progress=False)
    results["export"].update(rss_before=before, overlap=dict(art.stats["overlap"]))
    del art
    remove(folder / "meta.nnef.tar")
    if not args.get("weights"):
        remove(source)
    return results


def scaling(args: dict[str, Any]) -> dict[str, Any]:
    """Compile time per phase against the number of layers (narrow layers, traced on the
    meta device so that PyTorch computes nothing): is every phase linear in depth?"""
    import t2n

    kind = args["kind"]
    warm_up(kind)
    out: dict[str, Any] = {}
    for layers in args["layers_list"]:
        structure = models.build(kind, device="meta", small=True, layers=layers)
        models.materialize_buffers(kind, structure)
        real = models.build(kind, small=True, layers=layers)
        t0 = time.perf_counter()
        art = t2n.compile(structure, models.example_args(kind, structure),
                          weights_from=dict(models.unique_tensors(real)))
        out[str(layers)] = {"total": time.perf_counter() - t0, **art.stats["timings"], "ops": len(art.ir)}
    return out


def probe(args: dict[str, Any]) -> dict[str, Any]:
    return {"llama_problem": models.probe_llama()}


SCENARIOS = {"llm": llm, "from_disk": from_disk, "meta_export": meta_export, "scaling": scaling,
             "probe": probe, "frontend": frontends.scenario}


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    args = json.loads(sys.argv[1])
    import t2n.api  # noqa: F401 - imports are not part of any figure
    os.environ["T2N_BENCH_DIR"] = args.get("folder", "/tmp")
    result = SCENARIOS[args["scenario"]](args)
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
