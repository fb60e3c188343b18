"""Real-time factor of cache-aware streaming in tract: the time of one encoder step
(``t2n.nemo.export_streaming_asr``'s ``encoder_step`` artifact, run as
``t2n.nemo.streaming`` runs it) against the audio one chunk holds, per chunk size.

Two random FastConformer CTC models built from configs (nothing downloaded), both set up
as NeMo's cache-aware FastConformers are (chunked-limited attention with the
look-aheads ``[[70, 13], [70, 6], [70, 1], [70, 0]]``, causal convolutions and
subsampling, 8x):

- tiny: 16 mel features, d_model 32, 2 layers, 2 heads (the tests' model);
- mid: 80 mel features, d_model 256, 16 layers, 4 heads, feed-forward 1024, kernel 9,
  256 subsampling channels (the shape of NeMo's FastConformer "medium").

For each model and look-ahead: the export (``check=False``), then a 10 s synthetic
utterance cut into NeMo's chunks (``pad_and_drop_preencoded``: every step the same
shape); ``--rounds`` passes over its chunks, each step timed alone (wall clock and this
thread's CPU time; tract runs on this thread), the first call (tract's loading) left
out. Beside it, NeMo's own ``cache_aware_stream_step`` in PyTorch on the same chunks
(``torch.set_num_threads(1)``, so both use one core), and the largest gap between their
encoded frames. RTF is the step's time over the chunk's audio (below 1: faster than real
time); the chunk's audio is its shift (``shift_frames`` x 10 ms). The CPU time of the
thread is the figure to read on a shared machine: the wall clock adds other jobs' time.

``python -m benchmarks.nemo_streaming [--models tiny mid] [--rounds 5] [--write]``;
``--write`` replaces the tables of ``benchmarks/RESULTS_NEMO_STREAMING.md`` (notes below
its marker are kept).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

RESULTS = Path(__file__).with_name("RESULTS_NEMO_STREAMING.md")
KEEP = "<!-- --write replaces everything above this line and keeps what follows -->"

CONTEXTS = [[70, 13], [70, 6], [70, 1], [70, 0]]
TIMED = ([70, 13], [70, 6], [70, 1], [70, 0])
LABELS = [" ", "a", "b", "c", "d", "e", "f", "g", "h", "i", "'"]
SIZES = {
    "tiny": {"features": 16, "d_model": 32, "n_layers": 2, "n_heads": 2, "ff_expansion_factor": 2,
             "subsampling_conv_channels": 16},
    "mid": {"features": 80, "d_model": 256, "n_layers": 16, "n_heads": 4, "ff_expansion_factor": 4,
            "subsampling_conv_channels": 256},
}


def model_config(size: str) -> dict[str, Any]:
    """A cache-aware FastConformer CTC config of ``size`` (see the module)."""
    s = SIZES[size]
    pre = {"_target_": "nemo.collections.asr.modules.AudioToMelSpectrogramPreprocessor", "sample_rate": 16000,
           "normalize": "per_feature", "window_size": 0.025, "window_stride": 0.01, "window": "hann",
           "features": s["features"], "n_fft": 512, "log": True, "frame_splicing": 1, "dither": 1e-5,
           "pad_to": 0, "pad_value": 0.0}
    enc = {"_target_": "nemo.collections.asr.modules.ConformerEncoder", "feat_in": s["features"], "feat_out": -1,
           "n_layers": s["n_layers"], "d_model": s["d_model"], "ff_expansion_factor": s["ff_expansion_factor"],
           "self_attention_model": "rel_pos", "n_heads": s["n_heads"], "xscaling": True, "untie_biases": True,
           "pos_emb_max_len": 5000, "conv_norm_type": "batch_norm", "dropout": 0.1, "dropout_pre_encoder": 0.1,
           "dropout_emb": 0.0, "dropout_att": 0.1, "subsampling": "dw_striding", "subsampling_factor": 8,
           "subsampling_conv_channels": s["subsampling_conv_channels"], "conv_kernel_size": 9,
           "att_context_style": "chunked_limited", "att_context_size": CONTEXTS, "conv_context_size": "causal",
           "causal_downsampling": True}
    dec = {"_target_": "nemo.collections.asr.modules.ConvASRDecoder", "feat_in": None,
           "num_classes": len(LABELS), "vocabulary": LABELS}
    return {"sample_rate": 16000, "labels": LABELS, "preprocessor": pre, "encoder": enc, "decoder": dec}


def _percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def measure(model: Any, size: str, context: list[int], rounds: int, root: Path) -> dict[str, Any]:
    """Export ``model`` for ``context`` and time its steps in tract and NeMo's in PyTorch."""
    import t2n.nemo
    from t2n.nemo.streaming import StreamingTranscriber
    from t2n.nemo.streaming_export import streaming_setup
    from t2n.reference.nemo_asr import synthetic_utterance

    folder = root / f"{size}_{context[0]}_{context[1]}"
    began = time.perf_counter()
    t2n.nemo.export_streaming_asr(model, folder, att_context_size=context, check=False, overwrite=True)
    export_seconds = time.perf_counter() - began
    asr = t2n.nemo.load(folder)
    streamer = StreamingTranscriber(asr, "none")
    audio = synthetic_utterance(160000, 3)
    features = streamer.stream_features(audio)
    windows = list(streamer.windows(features))
    began = time.perf_counter()
    streamer.encode(windows[0])  # loads the artifact in tract
    load_seconds = time.perf_counter() - began
    wall: list[float] = []
    cpu: list[float] = []
    encoded: list[np.ndarray] = []
    for r in range(rounds):
        streamer.reset()
        for w in windows:
            w0, c0 = time.perf_counter(), time.thread_time()
            out = streamer.encode(w)
            cpu.append(time.thread_time() - c0)
            wall.append(time.perf_counter() - w0)
            if r == 0:
                encoded.append(out)
    torch_wall: list[float] = []
    torch_cpu: list[float] = []
    gap = 0.0
    encoder = model.encoder
    with streaming_setup(encoder, context), torch.no_grad():
        for r in range(rounds):
            ch, tm, ln = encoder.get_initial_cache_state(batch_size=1)
            for i, w in enumerate(windows):
                signal = torch.from_numpy(w.features[None, :, :w.length].copy())
                w0, c0 = time.perf_counter(), time.thread_time()
                enc, elen, ch, tm, ln = encoder.cache_aware_stream_step(
                    processed_signal=signal, processed_signal_length=torch.tensor([w.length]),
                    cache_last_channel=ch, cache_last_time=tm, cache_last_channel_len=ln,
                    keep_all_outputs=i == len(windows) - 1, drop_extra_pre_encoded=w.step.drop_extra_pre_encoded)
                torch_cpu.append(time.thread_time() - c0)
                torch_wall.append(time.perf_counter() - w0)
                if r == 0:
                    ref = enc[0, :, :int(elen[0])].numpy()
                    gap = max(gap, float(np.abs(ref - encoded[i]).max()))
    step = streamer.later
    chunk_seconds = step.shift_frames * 0.01
    params = sum(p.numel() for p in encoder.parameters())
    return {"model": size, "encoder_params": params, "att_context_size": context,
            "encoded_per_chunk": context[1] + 1, "chunk_ms": 1000 * chunk_seconds, "window_frames": step.window_frames,
            "chunks": len(windows), "tract_ms": 1000 * statistics.median(wall), "tract_p90_ms": 1000 * _percentile(wall, 90),
            "tract_cpu_ms": 1000 * statistics.median(cpu), "torch_ms": 1000 * statistics.median(torch_wall),
            "torch_cpu_ms": 1000 * statistics.median(torch_cpu), "rtf_tract": statistics.median(wall) / chunk_seconds,
            "rtf_tract_cpu": statistics.median(cpu) / chunk_seconds,
            "rtf_torch_cpu": statistics.median(torch_cpu) / chunk_seconds, "max_abs_gap": gap,
            "export_s": export_seconds, "load_s": load_seconds}


def table(rows: list[dict[str, Any]]) -> str:
    head = ("| model | encoder params | att_context_size | chunk (encoded frames) | chunk audio (ms) | window (feature "
            "frames) | tract ms/step | p90 | tract CPU ms | RTF tract (CPU) | RTF tract (wall) | PyTorch CPU ms | "
            "RTF PyTorch (CPU) | max abs gap | export s | load s |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        lines.append(f"| {r['model']} | {r['encoder_params'] / 1e6:.2f} M | {r['att_context_size']} | "
                     f"{r['encoded_per_chunk']} | {r['chunk_ms']:.0f} | {r['window_frames']} | {r['tract_ms']:.2f} | "
                     f"{r['tract_p90_ms']:.2f} | {r['tract_cpu_ms']:.2f} | {r['rtf_tract_cpu']:.3f} | "
                     f"{r['rtf_tract']:.3f} | {r['torch_cpu_ms']:.2f} | {r['rtf_torch_cpu']:.3f} | "
                     f"{r['max_abs_gap']:.1e} | {r['export_s']:.1f} | {r['load_s']:.2f} |")
    return "\n".join(lines)


def write(rows: list[dict[str, Any]], rounds: int) -> None:
    from importlib.metadata import version

    notes = RESULTS.read_text().split(KEEP, 1)[1] if RESULTS.exists() and KEEP in RESULTS.read_text() else "\n"
    body = (f"# Cache-aware streaming in tract: real-time factor per chunk\n\n"
            f"`python -m benchmarks.nemo_streaming --rounds {rounds} --write` on {platform.machine()} "
            f"({os.cpu_count()} cores), tract {version('tract')}, torch {torch.__version__}. "
            f"load average {os.getloadavg()[0]:.1f} at the end. One 10 s utterance per row, every chunk timed "
            "alone over the rounds (median; the first call, tract's loading, is the `load s` column); RTF = step "
            "time / chunk audio: CPU time of the thread (what the step costs) and wall clock (what a busy machine "
            "adds). See the module's docstring.\n\n"
            + table(rows) + "\n\n" + KEEP)
    RESULTS.write_text(body + notes)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["tiny", "mid"], choices=sorted(SIZES))
    parser.add_argument("--contexts", nargs="+", default=[f"{a},{b}" for a, b in TIMED])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    import t2n.nemo

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.models:
            model = t2n.nemo.load_model(model_config(size))
            for spec in args.contexts:
                context = [int(x) for x in spec.split(",")]
                row = measure(model, size, context, args.rounds, Path(tmp))
                print(table([row]).splitlines()[-1], flush=True)
                rows.append(row)
    print(table(rows))
    if args.write:
        write(rows, args.rounds)


if __name__ == "__main__":
    main()
