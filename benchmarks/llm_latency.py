"""tract latency of LLM artifacts: prefill (a 64-token prompt, empty cache) and decode
(one token at a time after it), for t2n's forms side by side and the widely used
exporter's artifact of the same checkpoint, all loaded and run in this one process.

Two random-init ``transformers`` checkpoints (``config.json`` + ``model.safetensors`` +
``tokenizer.json``, vocab 32000, 4 layers, hidden 512, 8 heads): a dense Llama
(intermediate 1376) and a mixture-of-experts Mixtral (8 experts of 704 hidden units, 2
per token). t2n exports each with ``t2n.llm.export_llm`` in several forms: its defaults
(explicit cache inputs/outputs, only the last position's logits, as the other exporter
writes by default), every position's logits (``num_logits_to_keep=0``), tract's
stateful cache, with tract's reified ops (sdpa, apply_rope, rms_norm) off or on. The
other exporter (package ``torch-to-nnef-llm``) runs from its own virtual environment
(``--peer-venv``, default ``/tmp/peervenv``, made as :mod:`benchmarks.peer` says) with
``-nv`` and a stub tract binary; without that environment its column is skipped with a
note.

Timing: rounds that visit every artifact of a checkpoint in turn (interleaved, so
machine load hits all alike; every other round in the reverse order, since the artifact
run last in a round was measured up to 10 % faster), each round loading the artifacts
afresh (a load's memory placement moved one artifact's decode by 15 %); in each round,
the median of several prefills (a fresh state each) and of the decode steps (prompt, then ``--decode-steps`` tokens, the cache
fed back or kept in the state), in wall-clock time and in this process's CPU time
(tract runs the artifact on this process's thread: on a shared machine the wall clock
also counts the time other jobs held the cores, the CPU time only what the artifact
costs). The figure is the median over rounds; ``vs peer`` is the ratio to the other
exporter's artifact in the same run (below 1: t2n is faster).

``python -m benchmarks.llm_latency [--rounds N] [--checkpoints llama mixtral] [--write]``;
``--write`` replaces the "Latency" section of ``benchmarks/RESULTS_LLM.md``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import peer
from benchmarks.measure import replace_section

PROMPT = 64
RESULTS = Path(__file__).with_name("RESULTS_LLM.md")
SECTION = "## Latency"

REIFIED = {"reify_sdpa_operator": True, "reify_rope": True, "reify_rms_norm": True}
FORMS: dict[str, dict[str, Any]] = {
    "t2n defaults": {},
    "t2n all logits": {"num_logits_to_keep": 0},
    "t2n + reified ops": dict(REIFIED),
    "t2n stateful": {"kv_cache": "stateful"},
    "t2n stateful + reified ops": {"kv_cache": "stateful", **REIFIED},
}
PEER = "other exporter (torch-to-nnef-llm)"
SHAPE = dict(hidden_size=512, num_attention_heads=8, num_key_value_heads=8, num_hidden_layers=4, vocab_size=32000,
             max_position_embeddings=2048)
CHECKPOINTS = {
    "llama": ("Llama (dense, intermediate 1376)", "LlamaConfig", "LlamaForCausalLM", {"intermediate_size": 1376}),
    "mixtral": ("Mixtral (8 experts of 704, top 2)", "MixtralConfig", "MixtralForCausalLM",
                {"intermediate_size": 704, "num_local_experts": 8, "num_experts_per_tok": 2}),
}


def make_checkpoint(folder: Path, kind: str = "llama") -> None:
    """The 4-layer, 512-wide checkpoint ``kind``, with a word-level tokenizer the other
    exporter needs."""
    import torch
    import transformers as tf
    from tokenizers import Tokenizer, models, pre_tokenizers

    torch.manual_seed(0)
    _, config_cls, model_cls, extra = CHECKPOINTS[kind]
    config = getattr(tf, config_cls)(**SHAPE, **extra)
    getattr(tf, model_cls)(config).eval().save_pretrained(folder)
    tok = Tokenizer(models.WordLevel({f"w{i}": i for i in range(32000)}, unk_token="w0"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(folder / "tokenizer.json"))


def export_peer(venv: Path, checkpoint: Path, out: Path) -> str | None:
    """The other exporter's artifact, or None (and why) when it cannot run here."""
    error = peer.run(venv, "t2n_export_llm_to_tract", ["-d", str(checkpoint), "-e", str(out), "-nv",
                                                       "--tract-specific-path", str(peer.stub_tract(out.parent))])
    if error is None:
        return None
    return error if error.startswith("skipped") else f"skipped: the other exporter failed: {error}"


class Runner:
    """One artifact loaded in tract: a prefill and a decode loop, timed."""

    def __init__(self, path: Path) -> None:
        from t2n.llm.common.generate import load_runnable

        self.runnable = load_runnable(path)
        self.stateful = self.runnable.input_count() == 1
        fact = str(self.runnable.input_fact(1)) if not self.stateful else ""
        self.heads, self.dim = (int(fact.split(",")[1]), int(fact.split(",")[3])) if fact else (0, 0)

    def _empty(self) -> list[np.ndarray]:
        count = self.runnable.input_count() - 1
        return [np.zeros((1, self.heads, 0, self.dim), np.float32) for _ in range(count)]

    def _step(self) -> Callable[[np.ndarray], list[Any]]:
        if self.stateful:
            state = self.runnable.spawn_state()
            return lambda ids: state.run([ids])  # type: ignore[no-any-return]
        cache = self._empty()

        def step(ids: np.ndarray) -> list[Any]:
            nonlocal cache
            out = self.runnable.run([ids, *cache])
            cache = [o.to_numpy() for o in out[1:]]
            return out  # type: ignore[no-any-return]

        return step

    def prefill(self, ids: np.ndarray) -> tuple[float, float]:
        """(wall, CPU) seconds of a prefill of ``ids`` with an empty cache."""
        step = self._step()
        t0, c0 = time.perf_counter(), time.process_time()
        step(ids)
        return time.perf_counter() - t0, time.process_time() - c0

    def decode(self, ids: np.ndarray, steps: int) -> tuple[float, float]:
        """Median (wall, CPU) seconds of one decoded token after the prompt (the cache
        conversions of the explicit form included: that is what a runtime does)."""
        step = self._step()
        step(ids)
        token = ids[:, -1:]
        walls, cpus = [], []
        for _ in range(steps):
            t0, c0 = time.perf_counter(), time.process_time()
            step(token)
            walls.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
        return statistics.median(walls), statistics.median(cpus)


Figures = tuple[float, float, float, float]
"""Prefill and decode seconds: wall, wall, CPU, CPU."""


def measure(paths: dict[str, Path], rounds: int, prefills: int, decode_steps: int) -> dict[str, Figures]:
    ids = np.random.RandomState(0).randint(0, 32000, (1, PROMPT)).astype(np.int64)
    seen: dict[str, list[Figures]] = {name: [] for name in paths}
    for i in range(rounds):
        order = list(paths.items()) if i % 2 == 0 else list(paths.items())[::-1]  # the last of a round runs faster
        # Loaded again each round, in the round's order: two loads of one artifact in one
        # process decoded 6.8 and 7.8 ms/token (where its weights landed in memory), so a
        # single load would make that luck the artifact's figure.
        runners = {name: Runner(path) for name, path in order}
        for runner in runners.values():  # warm-up
            runner.prefill(ids)
        for name, runner in runners.items():
            pre = [runner.prefill(ids) for _ in range(prefills)]
            dec = runner.decode(ids, decode_steps)
            seen[name].append((statistics.median(w for w, _ in pre), dec[0],
                               statistics.median(c for _, c in pre), dec[1]))
        del runners
    return {name: tuple(statistics.median(r[i] for r in rows) for i in range(4))  # type: ignore[misc]
            for name, rows in seen.items()}


def table(results: dict[str, Figures], note: str | None) -> str:
    """One checkpoint's rows: wall-clock times, and this process's CPU time (what the
    artifact costs, without the time a shared machine gave to other jobs)."""
    peer = results.get(PEER)
    lines = ["| artifact | prefill 64 tokens (ms) | decode (ms/token) | prefill CPU (ms) | decode CPU (ms/token) "
             "| prefill vs peer | decode vs peer | prefill CPU vs peer | decode CPU vs peer |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, figures in results.items():
        ratios = [f"{f / p:.2f}" for f, p in zip(figures, peer)] if peer else [""] * 4
        times = [f"{f * 1e3:.1f}" if i % 2 == 0 else f"{f * 1e3:.2f}" for i, f in enumerate(figures)]
        lines.append(f"| {name} | {' | '.join(times)} | {' | '.join(ratios)} |")
    if note:
        lines.append(f"\n{PEER}: {note}")
    return "\n".join(lines) + "\n"


def write_section(text: str) -> None:
    """Replace (or add) the "Latency" section of RESULTS_LLM.md, leaving the others."""
    replace_section(RESULTS, SECTION, text, "# LLM benchmarks")


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--prefills", type=int, default=5)
    parser.add_argument("--decode-steps", type=int, default=16)
    parser.add_argument("--peer-venv", type=Path, default=peer.DEFAULT_VENV)
    parser.add_argument("--checkpoints", nargs="*", default=list(CHECKPOINTS), choices=list(CHECKPOINTS))
    parser.add_argument("--only", nargs="*", default=None, help="t2n forms to run (names above)")
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS_LLM.md")
    args = parser.parse_args(argv)
    from t2n.llm import export_llm

    scratch = Path(tempfile.mkdtemp(prefix="t2n-llm-latency-"))
    load = os.getloadavg()
    parts = [f"{SECTION}\n\n`python -m benchmarks.llm_latency --rounds {args.rounds}` (tract {tract_version()}, "
             f"{os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}; load average {load[0]:.1f} at the start; "
             f"medians of {args.rounds} interleaved rounds; compare the ratios of one run):\n"]
    try:
        for kind in args.checkpoints:
            checkpoint = scratch / kind / "checkpoint"
            make_checkpoint(checkpoint, kind)
            paths: dict[str, Path] = {}
            for i, (name, options) in enumerate(FORMS.items()):
                if args.only is None or name in args.only:
                    paths[name] = export_llm(checkpoint, scratch / kind / f"t2n_{i}", verify=False, **options)
            note = export_peer(args.peer_venv, checkpoint, scratch / kind / "peer")
            if note is None:
                paths[PEER] = scratch / kind / "peer" / "model" / "model.nnef.tgz"
            results = measure(paths, args.rounds, args.prefills, args.decode_steps)
            parts.append(f"\n### {CHECKPOINTS[kind][0]}\n\n" + table(results, note))
        text = "".join(parts)
        print(text)
        if args.write:
            write_section(text)
        return text
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def tract_version() -> str:
    from importlib.metadata import version

    return version("tract")


if __name__ == "__main__":
    main(sys.argv[1:])
