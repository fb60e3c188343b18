"""Memory and latency of tract's KV-cache forms over a long generation: the stateful
cache as computed (f32), quantized to 8 and 4 bits (``kv_cache="stateful_int8"`` /
``"stateful_int4"``), and kept to the sliding window (``window_kv_cache=True``).

The checkpoint is a random-init ``transformers`` Mistral (4 layers, hidden 512, 8 heads
and 8 KV heads of 64, intermediate 1376, vocab 32000, sliding window 256): its full
cache grows by 4 x 2 x 8 x 64 f32 = 16 KiB per token. Every form is exported from it
with ``num_logits_to_keep=1`` and tract's reified ops.

- Memory: one child process per form loads the artifact, then generates ``--tokens``
  tokens one call each; the figure is the heap in use (glibc's ``mallinfo2``) at a few
  lengths minus the heap after the load and a first token: what the cache and tract's
  buffers add. Separate processes, because the heap is the process's, not a form's.
- Latency, in this one process, the forms interleaved token by token (so the machine's
  load hits all alike): the median time of one decode call over the 32 calls before
  each length, and a 64-token prompt (one call, or 64 calls for the window form, which
  takes one token per call).

``python -m benchmarks.llm_kv_cache_forms [--tokens 2048] [--write]``; ``--write``
replaces the "KV-cache forms" section of ``benchmarks/RESULTS_LLM.md``.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.measure import replace_section

RESULTS = Path(__file__).with_name("RESULTS_LLM.md")
SECTION = "## KV-cache forms"
PROMPT = 64
WINDOW = 256
STEPS = 32

REIFIED = {"num_logits_to_keep": 1, "reify_sdpa_operator": True, "reify_rope": True, "reify_rms_norm": True}
FORMS: dict[str, dict[str, Any]] = {
    "stateful (f32)": {"kv_cache": "stateful", **REIFIED},
    "stateful_int8": {"kv_cache": "stateful_int8", **REIFIED},
    "stateful_int4": {"kv_cache": "stateful_int4", **REIFIED},
    "stateful + window 256": {"kv_cache": "stateful", "window_kv_cache": True, **REIFIED},
}


def make_checkpoint(folder: Path) -> None:
    import torch
    import transformers as tf

    torch.manual_seed(0)
    config = tf.MistralConfig(hidden_size=512, intermediate_size=1376, num_attention_heads=8,
                              num_key_value_heads=8, num_hidden_layers=4, vocab_size=32000,
                              max_position_embeddings=8192, sliding_window=WINDOW)
    tf.MistralForCausalLM(config).eval().save_pretrained(folder)


class Generator:
    """One form in one tract state: a prompt, then one token per call."""

    def __init__(self, path: Path, one_token: bool) -> None:
        from t2n.llm.common.generate import load_runnable

        self.runnable = load_runnable(path)
        self.one_token = one_token
        self.state = self.runnable.spawn_state()

    def restart(self) -> None:
        self.state = self.runnable.spawn_state()

    def call(self, ids: np.ndarray) -> int:
        if self.one_token and ids.shape[1] > 1:
            for i in range(ids.shape[1] - 1):
                self.state.run([ids[:, i:i + 1]])
            ids = ids[:, -1:]
        return int(self.state.run([ids])[0].to_numpy()[0, -1].argmax())


def _lengths(tokens: int) -> list[int]:
    return [n for n in (256, 1024, 2048, 4096) if n <= tokens] or [tokens]


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


def heap_in_use() -> int:
    """Bytes the C allocator has handed out and not taken back (glibc's ``mallinfo2``:
    small blocks in use plus mmapped ones). Unlike resident memory, it does not hide a
    growth that reuses memory freed earlier (by the load)."""
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _MallInfo2
    info = libc.mallinfo2()
    return int(info.uordblks + info.hblkhd)


def memory_child(path: str, one_token: bool, tokens: int) -> None:
    """Run in a child: print {length: MiB added} as JSON."""
    rss = heap_in_use
    gen = Generator(Path(path), one_token)
    token = gen.call(np.array([[1]], dtype=np.int64))
    base = rss()
    out: dict[int, float] = {}
    wanted = set(_lengths(tokens))
    for n in range(2, tokens + 1):
        token = gen.call(np.array([[token]], dtype=np.int64))
        if n in wanted:
            out[n] = (rss() - base) / 2**20
    print(json.dumps(out))


def memory(paths: dict[str, Path], tokens: int) -> dict[str, dict[int, float]]:
    found: dict[str, dict[int, float]] = {}
    for name, path in paths.items():
        code = ("import sys; from benchmarks.llm_kv_cache_forms import memory_child; "
                f"memory_child({str(path)!r}, {FORMS[name].get('window_kv_cache', False)!r}, {tokens})")
        root = str(Path(__file__).resolve().parent.parent)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                              cwd=root, env={**os.environ, "PYTHONPATH": root})
        found[name] = {int(k): v for k, v in json.loads(done.stdout.strip().splitlines()[-1]).items()}
    return found


def latency(paths: dict[str, Path], tokens: int, rounds: int) -> tuple[dict[str, float], dict[str, dict[int, float]]]:
    """(median prompt time, {length: median decode time}) per form, in seconds."""
    gens = {name: Generator(path, FORMS[name].get("window_kv_cache", False)) for name, path in paths.items()}
    prompt = np.random.RandomState(0).randint(0, 32000, (1, PROMPT)).astype(np.int64)
    prompts: dict[str, list[float]] = {name: [] for name in gens}
    for _ in range(rounds):
        for name, gen in gens.items():
            gen.restart()
            t0 = time.perf_counter()
            gen.call(prompt)
            prompts[name].append(time.perf_counter() - t0)
    wanted = _lengths(tokens)
    steps: dict[str, dict[int, list[float]]] = {name: {n: [] for n in wanted} for name in gens}
    last: dict[str, int] = {}
    for name, gen in gens.items():
        gen.restart()
        last[name] = gen.call(prompt[:, :1])
    for n in range(2, tokens + 1):
        for name, gen in gens.items():
            t0 = time.perf_counter()
            last[name] = gen.call(np.array([[last[name]]], dtype=np.int64))
            elapsed = time.perf_counter() - t0
            for length in wanted:
                if length - STEPS < n <= length:
                    steps[name][length].append(elapsed)
    return ({name: statistics.median(v) for name, v in prompts.items()},
            {name: {n: statistics.median(v) for n, v in per.items()} for name, per in steps.items()})


def table(mem: dict[str, dict[int, float]], prompt: dict[str, float], decode: dict[str, dict[int, float]]) -> str:
    lengths = sorted(next(iter(mem.values())))
    head = ["form", *(f"memory at {n} tokens (MiB)" for n in lengths), f"prompt of {PROMPT} (ms)",
            *(f"decode at {n} (ms/token)" for n in lengths)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name in mem:
        cells = [name, *(f"{mem[name][n]:.1f}" for n in lengths), f"{prompt[name] * 1e3:.1f}",
                 *(f"{decode[name][n] * 1e3:.2f}" for n in lengths)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=2048)
    parser.add_argument("--rounds", type=int, default=3, help="prompts timed per form")
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS_LLM.md")
    args = parser.parse_args(argv)
    from t2n.llm import export_llm

    scratch = Path(tempfile.mkdtemp(prefix="t2n-kv-forms-"))
    try:
        checkpoint = scratch / "checkpoint"
        make_checkpoint(checkpoint)
        paths = {name: export_llm(checkpoint, scratch / f"form_{i}", verify=False, **options)
                 for i, (name, options) in enumerate(FORMS.items())}
        load = os.getloadavg()
        mem = memory(paths, args.tokens)
        prompt, decode = latency(paths, args.tokens, args.rounds)
        load = tuple(max(a, b) for a, b in zip(load, os.getloadavg()))
        text = (f"{SECTION}\n\n`python -m benchmarks.llm_kv_cache_forms --tokens {args.tokens}` (tract "
                f"{tract_version()}, {os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}, load average up to "
                f"{load[0]:.1f}): a 4-layer Mistral, hidden 512, 8 KV heads of 64 (16 KiB of f32 cache per "
                f"token), sliding window {WINDOW}. Memory: the heap a child process adds after its first "
                "token (glibc's mallinfo2), one process per form; latency: the forms interleaved token by token in one "
                f"process, medians of {STEPS} calls (prompts: {args.rounds} each).\n\n"
                + table(mem, prompt, decode))
        print(text)
        if args.write:
            replace_section(RESULTS, SECTION, text, "# LLM benchmarks")
        return text
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def tract_version() -> str:
    from importlib.metadata import version

    return version("tract")


if __name__ == "__main__":
    main(sys.argv[1:])
