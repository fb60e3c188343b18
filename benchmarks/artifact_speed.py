"""How fast t2n's artifacts run in tract, against the same models exported by torch.onnx.

Each model is exported twice, by t2n (``TractNNEF``) and by ``torch.onnx.export``
(TorchScript exporter, opset 17), and both files are loaded and run by the tract Python
wheel in this one process: load time (parse, type and optimise: ``load`` then
``into_runnable``), median run time, and the ratio t2n / ONNX (below 1: t2n is faster).
The runs of the two artifacts alternate (t2n, ONNX, t2n, ...), so that a burst of load
from other processes slows both sides alike. ``ALTERNATIVES`` are t2n's optional tract
forms (``TractNNEF`` options), measured against the same ONNX artifact.

``python -m benchmarks.artifact_speed [--only NAME ...] [--runs N] [--write]`` prints the
table; ``--write`` also writes it at the top of ``benchmarks/RESULTS_ARTIFACT_SPEED.md``,
keeping what follows the ``KEEP`` line there (hand-written notes, earlier tables). The
ONNX columns need the ``onnx`` package (``pip install t2n[bench]``); without it they are
left empty and the table says why.
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import t2n

DOC = Path(__file__).with_name("RESULTS_ARTIFACT_SPEED.md")
KEEP = "<!-- --write replaces everything above this line and keeps what follows -->"
Case = tuple[nn.Module, tuple[torch.Tensor, ...]]


class Lambda(nn.Module):
    def __init__(self, fn: Callable[..., torch.Tensor]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        return self.fn(*args)


class FirstOutput(nn.Module):
    """The first output of a recurrent layer or a transformers model (the tensor users read)."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        out = self.inner(*args)
        first: torch.Tensor = out[0] if isinstance(out, tuple) else out.logits if hasattr(out, "logits") \
            else out.last_hidden_state
        return first


def _gen() -> torch.Generator:
    return torch.Generator().manual_seed(0)


def lstm() -> Case:
    return FirstOutput(nn.LSTM(64, 128, num_layers=2, bidirectional=True, batch_first=True)), \
        (torch.randn(1, 200, 64, generator=_gen()),)


def gru() -> Case:
    return FirstOutput(nn.GRU(64, 128, num_layers=2, batch_first=True)), (torch.randn(1, 200, 64, generator=_gen()),)


def upsample(mode: str) -> Callable[[], Case]:
    def build() -> Case:
        extra: dict[str, Any] = {"align_corners": False} if mode == "bilinear" else {}
        return Lambda(lambda x: F.interpolate(x, size=(256, 256), mode=mode, **extra)), \
            (torch.randn(1, 16, 64, 64, generator=_gen()),)
    return build


def cumsum() -> Case:
    return Lambda(lambda x: torch.cumsum(x, dim=1)), (torch.randn(4, 1000, 64, generator=_gen()),)


def convnet() -> Case:
    def block(i: int, o: int) -> list[nn.Module]:
        return [nn.Conv2d(i, o, 3, padding=1, bias=False), nn.BatchNorm2d(o), nn.ReLU(), nn.MaxPool2d(2)]
    net = nn.Sequential(*block(3, 32), *block(32, 64), *block(64, 128), *block(128, 256),
                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(256, 1000))
    return net.eval(), (torch.randn(1, 3, 224, 224, generator=_gen()),)


def llama() -> Case:
    import transformers as tf

    cfg = tf.LlamaConfig(vocab_size=1000, hidden_size=256, intermediate_size=688, num_hidden_layers=4,
                         num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=256,
                         use_cache=False)
    cfg._attn_implementation = "eager"
    ids = torch.randint(0, 1000, (1, 128), generator=_gen())
    return FirstOutput(tf.LlamaForCausalLM(cfg)).eval(), (ids, torch.ones(1, 128, dtype=torch.long))


def bert() -> Case:
    import transformers as tf

    cfg = tf.BertConfig(vocab_size=1000, hidden_size=256, num_hidden_layers=4, num_attention_heads=8,
                        intermediate_size=1024, max_position_embeddings=256)
    cfg._attn_implementation = "eager"
    return FirstOutput(tf.BertModel(cfg)).eval(), (torch.randint(0, 1000, (1, 128), generator=_gen()),)


def attention() -> Case:
    def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        causal = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
        return F.scaled_dot_product_attention(q, k, v, attn_mask=causal & keep[:, None, None, :])
    g = _gen()
    keep = torch.ones(1, 128, dtype=torch.bool)
    keep[:, 100:] = False
    return Lambda(attend), (torch.randn(1, 8, 128, 64, generator=g), torch.randn(1, 8, 128, 64, generator=g),
                            torch.randn(1, 8, 128, 64, generator=g), keep)


MODELS: dict[str, Callable[[], Case]] = {
    "lstm (2 layers, bidirectional, 200 steps)": lstm,
    "gru (2 layers, 200 steps)": gru,
    "upsample bilinear 64²→256²": upsample("bilinear"),
    "upsample nearest 64²→256²": upsample("nearest"),
    "cumsum over 1000 steps": cumsum,
    "convnet 224²": convnet,
    "llama (4 layers, 128 tokens)": llama,
    "bert (4 layers, 128 tokens)": bert,
    "attention with masks (128)": attention,
}


ALTERNATIVES: dict[str, tuple[str, dict[str, Any]]] = {
    "upsample nearest 64²→256², upsample_with_debox": ("upsample nearest 64²→256²", {"upsample_with_debox": True}),
    "attention with masks (128), reify_sdpa_operator": ("attention with masks (128)", {"reify_sdpa_operator": True}),
}
"""Row name → (model, ``TractNNEF`` options)."""


def onnx_missing() -> str | None:
    """Why the ONNX columns cannot be filled, or None when they can."""
    try:
        importlib.import_module("onnx")
    except ImportError:
        return "the `onnx` package is not installed (pip install 't2n[bench]'): ONNX columns skipped"
    return None


def _load(loader: Any, path: Path) -> tuple[Any, float]:
    """(runnable, seconds to load and optimise it)."""
    start = time.perf_counter()
    model = loader.load(str(path))
    if hasattr(model, "into_model"):  # ONNX: an inference model, typed from the file's facts
        model = model.into_model()
    runnable = model.into_runnable()
    return runnable, time.perf_counter() - start


def _time_interleaved(runnables: dict[str, Any], inputs: Sequence[np.ndarray], runs: int) -> dict[str, float]:
    """Median run time of each runnable, their runs alternating, after one warm-up each."""
    times: dict[str, list[float]] = {k: [] for k in runnables}
    for r in runnables.values():
        r.run(list(inputs))
    for _ in range(runs):
        for k, r in runnables.items():
            start = time.perf_counter()
            r.run(list(inputs))
            times[k].append(time.perf_counter() - start)
    return {k: statistics.median(v) for k, v in times.items()}


def _t2n_loader(tract: Any, registries: Sequence[str]) -> Any:
    loader = tract.nnef()
    for reg in registries:
        method = {"tract_transformers": "with_tract_transformers", "tract_extra": "with_tract_extra"}.get(reg)
        if method is not None:
            loader = getattr(loader, method)()
    return loader


def measure(name: str, runs: int, tmp: Path) -> dict[str, Any]:
    import tract

    model_name, options = ALTERNATIVES.get(name, (name, {}))
    torch.manual_seed(0)
    model, args = MODELS[model_name]()
    inputs = [np.ascontiguousarray(a.numpy()) for a in args]
    row: dict[str, Any] = {"model": name}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        art = t2n.export(model, args, tmp / "model.nnef.tar", target=t2n.TractNNEF.latest(**options))
    runnables, loads = {}, {}
    runnables["t2n"], loads["t2n"] = _load(_t2n_loader(tract, art.rendered.registries), tmp / "model.nnef.tar")
    if onnx_missing() is None:
        try:
            with warnings.catch_warnings(), torch.no_grad():
                warnings.simplefilter("ignore")
                torch.onnx.export(model, args, str(tmp / "model.onnx"), dynamo=False, opset_version=17)
        except Exception as exc:  # the table says which model torch.onnx refused, and why
            row["onnx_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
        else:
            runnables["onnx"], loads["onnx"] = _load(tract.onnx(), tmp / "model.onnx")
    medians = _time_interleaved(runnables, inputs, runs)
    for k in runnables:
        row[k] = {"load": loads[k], "run": medians[k]}
    return row


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f}"


def table(rows: Sequence[dict[str, Any]], note: str | None) -> str:
    lines = ["| model | t2n load ms | t2n run ms | ONNX load ms | ONNX run ms | run t2n/ONNX |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        t, o = r["t2n"], r.get("onnx")
        onnx_cells = [_ms(o["load"]), _ms(o["run"]), f"{t['run'] / o['run']:.2f}"] if o else ["–", "–", "–"]
        lines.append("| " + " | ".join([r["model"], _ms(t["load"]), _ms(t["run"]), *onnx_cells]) + " |")
    failed = [f"* {r['model']}: torch.onnx failed ({r['onnx_error']})" for r in rows if "onnx_error" in r]
    if failed:
        lines += ["", *failed]
    if note:
        lines.append(f"\n{note}")
    return "\n".join(lines) + "\n"


def header(runs: int) -> str:
    import platform

    import tract

    return (f"# Artifact speed in tract: t2n against torch.onnx\n\n`python -m benchmarks.artifact_speed "
            f"--runs {runs} --write` (tract {tract.version()}, torch {torch.__version__}, {os.cpu_count()} cores, "
            f"{platform.machine()}). Times in ms; load = parse, type and optimise; run = median of "
            "the runs after one warm-up, the two artifacts' runs alternating.\n\n")


def results_section(doc: Path = DOC) -> list[str]:
    """The summary that ``benchmarks/RESULTS.md`` shows: each model's run-time ratio from
    the table ``--write`` last wrote, and a link to the whole file."""
    text = doc.read_text() if doc.exists() else ""
    top = text[:text.index(KEEP)] if KEEP in text else text
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in top.splitlines()
            if line.startswith("| ") and not line.startswith("| model")]
    lines = ["## Artifact speed in tract", "",
             "How fast t2n's artifacts run in tract against the same models exported by `torch.onnx` and "
             "loaded by tract's ONNX loader (one process, the two artifacts' runs alternating; below 1: "
             f"t2n is faster). Load and run times, the command, the earlier forms and notes on noise: "
             f"[{doc.name}]({doc.name}).", ""]
    if not rows:
        return lines + ["(no table yet: `python -m benchmarks.artifact_speed --write`)", ""]
    lines += ["| model | run t2n/ONNX |", "|---|---:|"]
    lines += [f"| {r[0]} | {r[-1]} |" for r in rows if len(r) == 6]
    return lines + [""]


def main(argv: Sequence[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--only", nargs="*", help="substrings of model names to run")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--write", action="store_true", help=f"write {DOC.name}")
    ns = parser.parse_args(argv)
    names = [n for n in [*MODELS, *ALTERNATIVES] if not ns.only or any(s in n for s in ns.only)]
    note = onnx_missing()
    rows = []
    for name in names:
        with tempfile.TemporaryDirectory() as tmp:
            rows.append(measure(name, ns.runs, Path(tmp)))
        print(table(rows[-1:], None).splitlines()[-1], flush=True)
    text = table(rows, note)
    print(text)
    if ns.write:
        kept = DOC.read_text() if DOC.exists() else ""
        kept = kept[kept.index(KEEP):] if KEEP in kept else ""
        DOC.write_text(header(ns.runs) + text + ("\n" + kept if kept else ""))
    return text


if __name__ == "__main__":
    main()
