"""tract speed of t2n's encoder-decoder artifacts against the same model exported by
``torch.onnx`` and run by tract's ONNX loader, all loaded and timed in this one process.

Two random-init ``transformers`` models: a Whisper-tiny-like one (d_model 384, 4 + 4
layers, 6 heads, 80 mel bins, 1500 encoder positions: 3000 feature frames, vocab 51865)
and a Marian-like one (d_model 512, 6 + 6 layers, 8 heads, vocab 58101). For each:

- t2n's defaults, ``t2n.llm.seq2seq.export_seq2seq`` with the explicit cache
  (``in_cache_*`` fed back) and with ``kv_cache="stateful"`` (tract's state; its encoder
  is the same graph as the explicit export's, timed once);
- ``torch.onnx.export`` (TorchScript exporter, opset 17, dynamic axes) of the same two
  steps, laid out as optimum lays out an encoder-decoder: an encoder, and a
  decoder-with-past taking the self-attention cache and the cross-attention keys and
  values as inputs. The ONNX graphs are traced from the same modules t2n traces (the
  model's own code), so both sides compute the same thing: the encoder also returns the
  cross keys and values (optimum computes them in the first call of a third graph,
  ``decoder_model.onnx``); the decoder returns the last position's logits and the grown
  cache. Each ONNX graph's outputs are compared with t2n's on the same inputs;
- t2n's two exports without the tied projection's copy (:data:`COPY_OFF`,
  ``--no-copy-off`` to skip): what the copy buys.

Timing, in this process's CPU time (tract runs on this thread; a shared machine's other
jobs do not count) and wall clock: the encoder, median of interleaved runs
(:func:`benchmarks.speed_engines.time_interleaved`) for each source length; the decoder,
per token: a call on the start token, then ``N`` calls of one token each (fixed random
tokens, the same on every side), each side with one tract state, its cache outputs fed
back as tract tensors and the cross keys and values given as tract tensors made once (as a
runtime keeps them: no numpy copies in the loop); the mean over the ``N`` calls, median
over ``--rounds`` rounds whose sides run in turn (each first in turn). Ratios are t2n's
time over the ONNX path's in the same run (below 1: t2n is faster).

``python -m benchmarks.seq2seq_speed [--models whisper marian] [--rounds 3] [--write]``;
``--write`` replaces the tables of ``benchmarks/RESULTS_SEQ2SEQ.md`` (notes below its
marker are kept). Needs the ``onnx`` package (``pip install 't2n[bench]'``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.speed_engines import first_line, onnx_missing, time_interleaved

RESULTS = Path(__file__).with_name("RESULTS_SEQ2SEQ.md")
KEEP = "<!-- --write replaces everything above this line and keeps what follows -->"

WHISPER = dict(vocab_size=51865, d_model=384, encoder_layers=4, decoder_layers=4, encoder_attention_heads=6,
               decoder_attention_heads=6, encoder_ffn_dim=1536, decoder_ffn_dim=1536, num_mel_bins=80,
               max_source_positions=1500, max_target_positions=448, decoder_start_token_id=50258,
               eos_token_id=50257, pad_token_id=50257, bos_token_id=50257)
MARIAN = dict(vocab_size=58101, d_model=512, encoder_layers=6, decoder_layers=6, encoder_attention_heads=8,
              decoder_attention_heads=8, encoder_ffn_dim=2048, decoder_ffn_dim=2048, max_position_embeddings=512,
              decoder_start_token_id=58100, pad_token_id=58100, eos_token_id=0)
MODELS = {
    "whisper": "Whisper-tiny-like (d_model 384, 4+4 layers, 6 heads, 80 mel bins, vocab 51865)",
    "marian": "Marian-like (d_model 512, 6+6 layers, 8 heads, vocab 58101)",
}
COPY_OFF = "copy off"
"""t2n's artifacts of the same model written with ``copy_tied_weights=False``: the output
projection reads the embedding matrix it is tied to, which tract then packs at every
decoder call (its constant folding leaves a large constant with several readers alone).
The default writes a transposed copy for the projection, packed once at load, as
torch.onnx writes a second initializer (see ``t2n/backends/tract/passes/product_weights.py``)."""


def build(kind: str, positions: int) -> torch.nn.Module:
    """The random-init model ``kind`` (Whisper: ``positions`` encoder positions)."""
    import transformers as tf

    torch.manual_seed(0)
    if kind == "whisper":
        config = tf.WhisperConfig(**{**WHISPER, "max_source_positions": positions})
        model: torch.nn.Module = tf.WhisperForConditionalGeneration(config)
    else:
        model = tf.MarianMTModel(tf.MarianConfig(**MARIAN))
    return model.eval()


class Exported:
    """One model's artifacts: t2n's two exports and the ONNX encoder and decoder-with-past
    (or why torch.onnx could not write them)."""

    def __init__(self, model: Any, folder: Path, copy_off: bool) -> None:
        from t2n.llm.common.options import LLMExportOptions
        from t2n.llm.seq2seq import export_seq2seq
        from t2n.llm.seq2seq.families import family_of
        from t2n.llm.seq2seq.wrappers import read_layout

        self.family = family_of(model.config.model_type, type(model).__name__)
        self.vocab = int(model.config.vocab_size)
        self.example = self.family.example(model, 16)
        self.layout = read_layout(model, self.family.input_name, self.example)
        self.t2n: dict[str, Path] = {}
        self.seconds: dict[str, float] = {}
        for form in ("explicit", "stateful"):
            start = time.perf_counter()
            export_seq2seq(model, folder / f"t2n_{form}", LLMExportOptions(kv_cache=form, verify=False))
            self.t2n[form] = folder / f"t2n_{form}"
            self.seconds[f"t2n {form}"] = time.perf_counter() - start
            if copy_off:
                export_seq2seq(model, folder / f"t2n_{form}_copy_off",
                               LLMExportOptions(kv_cache=form, verify=False, copy_tied_weights=False))
                self.t2n[f"{form}, {COPY_OFF}"] = folder / f"t2n_{form}_copy_off"
        start = time.perf_counter()
        self.onnx: dict[str, Path | str] = {"encoder": self._onnx_encoder(model, folder / "encoder.onnx"),
                                            "decoder": self._onnx_decoder(model, folder / "decoder_with_past.onnx")}
        self.seconds["torch.onnx"] = time.perf_counter() - start

    def _onnx_encoder(self, model: Any, path: Path) -> Path | str:
        from t2n.llm.seq2seq.wrappers import EncoderWrapper

        layout = self.layout
        axes = {name: {2: "T"} for name in layout.cross_outputs()} | {"encoder_hidden_states": {1: "T"}}
        return export_onnx(EncoderWrapper(model, self.family.input_name), (self.example,), path,
                           [self.family.input_name], layout.encoder_outputs(),
                           {**layout.encoder_axes(), **axes} if self.family.input_name == "input_ids" else {})

    def _onnx_decoder(self, model: Any, path: Path) -> Path | str:
        from t2n.llm.seq2seq.export import DECODER_EXAMPLE
        from t2n.llm.seq2seq.wrappers import DecoderWrapper

        layout = self.layout
        ids = torch.randint(0, int(model.config.vocab_size), (1, 1), generator=torch.Generator().manual_seed(1))
        example = (ids, *layout.empty_cache(DECODER_EXAMPLE["P"], random=True),
                   *layout.example_cross(DECODER_EXAMPLE["T"]))
        axes = {**layout.decoder_axes(), **{name: {2: "P_S"} for name in layout.cache_outputs()}}
        return export_onnx(DecoderWrapper(model, layout.layers), example, path, layout.traced_decoder_inputs(),
                           layout.traced_decoder_outputs(), axes)


def export_onnx(module: torch.nn.Module, args: tuple[torch.Tensor, ...], path: Path, inputs: list[str],
                outputs: list[str], axes: dict[str, dict[int, str]]) -> Path | str:
    """The ONNX file, or why torch.onnx refused the module (one line)."""
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(module, args, str(path), dynamo=False, opset_version=17, input_names=inputs,
                              output_names=outputs, dynamic_axes=axes)
    except Exception as exc:  # the table says which graph torch.onnx refused, and why
        return f"{type(exc).__name__}: {first_line(exc)}"
    return path


def load_onnx(path: Path) -> Any:
    import tract

    return tract.onnx().load(str(path)).into_model().into_runnable()


def load_nnef(path: Path) -> Any:
    from t2n.llm.common.generate import load_runnable

    return load_runnable(path)


def source(kind: str, exported: Exported, length: int) -> np.ndarray:
    """An encoder input: ``length`` random token ids, or Whisper's features (its one length)."""
    if kind == "whisper":
        return exported.example.numpy()
    return np.random.RandomState(length).randint(1, 58000, (1, length)).astype(np.int64)


def gap(got: Sequence[np.ndarray], want: Sequence[np.ndarray]) -> float:
    """The largest absolute difference between two lists of outputs, relative to the largest value."""
    worst = 0.0
    for g, w in zip(got, want):
        if g.shape != w.shape:
            return float("inf")
        scale = max(1.0, float(np.max(np.abs(w)))) if w.size else 1.0
        worst = max(worst, float(np.max(np.abs(g.astype(np.float64) - w))) / scale if w.size else 0.0)
    return worst


class Decoder:
    """A decoder artifact in one tract state: its inputs in graph order, the explicit
    cache (if any) fed back as tract tensors."""

    def __init__(self, runnable: Any, names: list[str], layout: Any, stateful: bool) -> None:
        self.runnable, self.names, self.stateful = runnable, names, stateful
        self.cache_inputs = [] if stateful else layout.cache_inputs()
        self.empty = {n: np.zeros((1, layout.heads, 0, layout.head_dim), np.float32) for n in self.cache_inputs}

    def sequence(self, cross: dict[str, Any], tokens: np.ndarray) -> tuple[list[float], list[float], np.ndarray]:
        """(wall seconds, CPU seconds) of each one-token call after the call on
        ``tokens[0]``, and the last call's logits."""
        import tract

        state = self.runnable.spawn_state()
        known: dict[str, Any] = {**cross, **{n: tract.Tensor.from_numpy(a) for n, a in self.empty.items()}}
        walls, cpus = [], []
        out: list[Any] = []
        for k in range(tokens.shape[1]):
            ids = tokens[:, k:k + 1]
            inputs = [ids if n == "input_ids" else known[n] for n in self.names]
            t0, c0 = time.perf_counter(), time.process_time()
            out = state.run(inputs)
            if k:
                walls.append(time.perf_counter() - t0)
                cpus.append(time.process_time() - c0)
            known.update(zip(self.cache_inputs, out[1:]))
        return walls, cpus, out[0].to_numpy()


def measure_model(kind: str, exported: Exported, sources: Sequence[int], decoded: Sequence[int], rounds: int,
                  min_seconds: float) -> list[dict[str, Any]]:
    """One row per (source length, decoded length): the encoder's and the decoder's times."""
    import tract

    from t2n.llm.seq2seq.manifest import Manifest

    layout = exported.layout
    manifests = {form: Manifest.read(path) for form, path in exported.t2n.items()}
    explicit = manifests["explicit"]
    encoders: dict[str, Any] = {"t2n": load_nnef(explicit.encoder_path)}
    decoders = {f"t2n {form}": Decoder(load_nnef(m.decoder_path), [i.name for i in m.decoder_inputs], layout,
                                       m.stateful) for form, m in manifests.items()}
    notes: dict[str, str] = {}
    for part, found in exported.onnx.items():
        if isinstance(found, str):
            notes[part] = f"torch.onnx could not export the {part}: {found}"
            continue
        try:
            runnable = load_onnx(found)
        except Exception as exc:  # tract's ONNX loader refused it: said in the table
            notes[part] = f"tract's ONNX loader refused the {part}: {type(exc).__name__}: {first_line(exc)}"
            continue
        if part == "encoder":
            encoders["onnx"] = runnable
        else:
            decoders["onnx"] = Decoder(runnable, layout.traced_decoder_inputs(), layout, False)
    rows = []
    lengths = [int(exported.example.shape[2] // 2)] if kind == "whisper" else list(sources)
    for length in lengths:
        x = source(kind, exported, length)
        enc_times, _ = time_interleaved(encoders, [x], rounds, min_seconds, clock=time.process_time)
        outputs = {side: [o.to_numpy() for o in runnable.run([x])] for side, runnable in encoders.items()}
        row_notes = dict(notes)
        if "onnx" in outputs and gap(outputs["onnx"], outputs["t2n"]) > 1e-3:
            row_notes["encoder outputs"] = f"ONNX encoder off by {gap(outputs['onnx'], outputs['t2n']):.2g}"
        names = [o.name for o in explicit.encoder_outputs]
        cross = {explicit.feeds[n]: tract.Tensor.from_numpy(a) for n, a in zip(names, outputs["t2n"])
                 if n in explicit.feeds}
        for count in decoded:
            tokens = np.random.RandomState(count).randint(1, exported.vocab, (1, count + 1)).astype(np.int64)
            tokens[0, 0] = int(explicit.rules.prompt[0])
            per: dict[str, list[tuple[float, float]]] = {side: [] for side in decoders}
            logits: dict[str, np.ndarray] = {}
            order = list(decoders)
            for r in range(rounds):
                for side in order[r % len(order):] + order[:r % len(order)]:
                    walls, cpus, logits[side] = decoders[side].sequence(cross, tokens)
                    per[side].append((statistics.mean(walls), statistics.mean(cpus)))
            cell_notes = dict(row_notes)
            for side in logits:
                if side != "t2n explicit" and gap([logits[side]], [logits["t2n explicit"]]) > 1e-3:
                    cell_notes[f"{side} logits"] = (f"{side}'s last logits off by "
                                                    f"{gap([logits[side]], [logits['t2n explicit']]):.2g}")
            rows.append({
                "model": kind, "source": length, "decoded": count,
                "encoder_cpu": {side: enc_times[side] for side in encoders},
                "decoder_wall": {side: statistics.median(w for w, _ in v) for side, v in per.items()},
                "decoder_cpu": {side: statistics.median(c for _, c in v) for side, v in per.items()},
                "notes": cell_notes})
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def _ratio(values: dict[str, float], side: str) -> str:
    return f"{values[side] / values['onnx']:.2f}" if side in values and "onnx" in values else "n/a"


def _ms(values: dict[str, float], side: str, digits: int = 2) -> str:
    return f"{values[side] * 1e3:.{digits}f}" if side in values else "n/a"


def table(rows: list[dict[str, Any]]) -> str:
    """The encoder rows (one per source length) and the decoder rows (per decoded length)."""
    lines = ["| model | source | encoder ONNX ms | encoder t2n ms | encoder t2n / ONNX |", "|---|---:|---:|---:|---:|"]
    seen = set()
    for r in rows:
        if (r["model"], r["source"]) in seen:
            continue
        seen.add((r["model"], r["source"]))
        e = r["encoder_cpu"]
        lines.append(f"| {r['model']} | {_source(r)} | {_ms(e, 'onnx', 1)} | {_ms(e, 't2n', 1)} | {_ratio(e, 't2n')} |")
    forms = [f"t2n {f}" for f in ("explicit", "stateful", f"explicit, {COPY_OFF}", f"stateful, {COPY_OFF}")]
    shown = [f for f in forms if any(f in r["decoder_cpu"] for r in rows)]
    lines += ["", "| model | source | decoded | ONNX ms/token | " + " | ".join(f"{f} ms/token" for f in shown) + " | "
              + " | ".join(f"{f} / ONNX" for f in shown) + " |", "|---|---:|---:|---:|" + "---:|" * (2 * len(shown))]
    for r in rows:
        c = r["decoder_cpu"]
        lines.append(f"| {r['model']} | {_source(r)} | {r['decoded']} | {_ms(c, 'onnx')} | "
                     + " | ".join(_ms(c, f) for f in shown) + " | " + " | ".join(_ratio(c, f) for f in shown) + " |")
    notes = sorted({f"{r['model']}: {n}" for r in rows for n in r["notes"].values()})
    return "\n".join(lines + ([""] + [f"* {n}" for n in notes] if notes else [])) + "\n"


def _source(row: dict[str, Any]) -> str:
    return f"{row['source']} positions" if row["model"] == "whisper" else f"{row['source']} tokens"


def machine() -> str:
    from importlib.metadata import version

    load = os.getloadavg()
    return (f"tract {version('tract')}, torch {torch.__version__}, transformers {version('transformers')}, "
            f"{os.cpu_count()} cores ({platform.machine()}), load average {load[0]:.1f} at the start, "
            f"{time.strftime('%Y-%m-%d')}")


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--sources", nargs="*", type=int, default=[16, 64, 256],
                        help="Marian's source lengths (tokens)")
    parser.add_argument("--decoded", nargs="*", type=int, default=[16, 64, 128], help="decoded lengths (tokens)")
    parser.add_argument("--whisper-positions", type=int, default=1500,
                        help="Whisper's encoder positions (frames / 2; 1500 is Whisper's 30 s)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--copy-off", action=argparse.BooleanOptionalAction, default=True,
                        help="also time t2n's artifacts written without the tied projection's copy")
    parser.add_argument("--min-seconds", type=float, default=5.0, help="encoder: time each side about this long")
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS_SEQ2SEQ.md")
    args = parser.parse_args(argv)
    missing = onnx_missing()
    if missing is not None:
        sys.exit(missing)
    torch.set_num_threads(1)
    scratch = Path(tempfile.mkdtemp(prefix="t2n-seq2seq-speed-"))
    note = machine()
    rows: list[dict[str, Any]] = []
    exports: dict[str, dict[str, float]] = {}
    try:
        for kind in args.models:
            model = build(kind, args.whisper_positions)
            exported = Exported(model, scratch / kind, args.copy_off)
            exports[kind] = exported.seconds
            rows += measure_model(kind, exported, args.sources, args.decoded, args.rounds, args.min_seconds)
            shutil.rmtree(scratch / kind, ignore_errors=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    command = "python -m benchmarks.seq2seq_speed " + " ".join(argv if argv is not None else sys.argv[1:])
    text = report(command.strip(), note, rows, exports, args)
    print(text)
    if args.write:
        kept = RESULTS.read_text().split(KEEP, 1)[1] if RESULTS.exists() and KEEP in RESULTS.read_text() else "\n"
        RESULTS.write_text(text + "\n" + KEEP + kept)
        RESULTS.with_suffix(".json").write_text(json.dumps({"machine": note, "rows": rows, "exports": exports},
                                                           indent=1) + "\n")
    return text


def report(command: str, note: str, rows: list[dict[str, Any]], exports: dict[str, dict[str, float]],
           args: argparse.Namespace) -> str:
    seconds = "; ".join(f"{kind}: " + ", ".join(f"{side} {s:.0f} s" for side, s in times.items())
                        for kind, times in exports.items())
    return (f"# Encoder-decoder speed in tract: t2n against torch.onnx\n\n`{command}` ({note}). "
            f"{MODELS['whisper'].split(' (')[0]}: {MODELS['whisper'].split(' (')[1].rstrip(')')}, "
            f"{args.whisper_positions} encoder positions ({2 * args.whisper_positions} feature frames); "
            f"{MODELS['marian']}. Random weights. CPU time of this process in ms (the wall clock is in RESULTS_SEQ2SEQ.json); "
            f"encoder: median of interleaved runs (at least {args.rounds}, about {args.min_seconds:g} s "
            f"each side); decoder: mean per one-token call over the decoded length after the start token, "
            f"median of {args.rounds} rounds. Ratios: t2n over the ONNX path (below 1: t2n is faster). "
            f"*{COPY_OFF}*: t2n's artifacts of the same model written with `copy_tied_weights=False` (the output "
            f"projection reads the embedding matrix it is tied to; not the default: see below). "
            f"The stateful export's encoder is the explicit one's graph (timed once). "
            f"Export times: {seconds}.\n\n{table(rows)}")


if __name__ == "__main__":
    main(sys.argv[1:])
