"""tract's load time of a recurrent 2-D model (sequencer style: bidirectional LSTMs over
the rows and the columns of a feature map), t2n's artifact against tract's ONNX path.

The model (:class:`SequencerNet`: a 4×4 patch stem, ``depth`` blocks of two BiLSTMs and a
linear layer, a linear head) is exported by t2n (``TractNNEF``) and by
``torch.onnx.export`` (TorchScript exporter, opset 17). Each file is then loaded by the
tract Python wheel (``load`` then ``into_runnable``: parse, type, declutter, optimise;
the loader itself is made before the clock starts, as a program loading several models
makes it once) ``--rounds`` times, each time in a fresh process, the two alternating so
that other load on the machine slows both alike, and run ``--runs`` times on the same
input. The load's CPU time (``time.process_time``) is reported beside its wall time, as
it moves less when other processes share the machine. Both outputs are compared with
PyTorch's. A load that does not finish within ``--deadline`` seconds is reported as such
(each load runs in a child process, so a hang cannot stop the run).

``python -m benchmarks.recurrent_load [--depth 4] [--size 56] [--rounds 5] [--runs 20] [--write]``
prints a Markdown table; ``--write`` also writes it to ``benchmarks/RESULTS_RECURRENT_LOAD.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

RESULTS = Path(__file__).with_name("RESULTS_RECURRENT_LOAD.md")

CHILD = r"""
import json, sys, time
import numpy as np
import tract
path, inputs, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
loader = tract.onnx() if path.endswith(".onnx") else tract.nnef()
start, cpu = time.perf_counter(), time.process_time()
model = loader.load(path)
model = model.into_model() if path.endswith(".onnx") else model
runnable = model.into_runnable()
load, load_cpu = time.perf_counter() - start, time.process_time() - cpu
x = np.load(inputs)
out = runnable.run([x])[0].to_numpy()
times = []
for _ in range(runs):
    t = time.perf_counter()
    runnable.run([x])
    times.append(time.perf_counter() - t)
np.save(inputs + ".out.npy", out)
print("RESULT " + json.dumps({"load": load, "load_cpu": load_cpu, "runs": times}))
"""


class Sequencer2D(nn.Module):
    """BiLSTM down the columns and along the rows of a [B, H, W, C] map, concat, linear."""

    def __init__(self, channels: int, hidden: int) -> None:
        super().__init__()
        self.rnn_v = nn.LSTM(channels, hidden, batch_first=True, bidirectional=True)
        self.rnn_h = nn.LSTM(channels, hidden, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(4 * hidden, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, h, w, c = x.shape
        v, _ = self.rnn_v(x.permute(0, 2, 1, 3).reshape(-1, h, c))
        v = v.reshape(b, w, h, -1).permute(0, 2, 1, 3)
        r, _ = self.rnn_h(x.reshape(-1, w, c))
        return x + self.fc(torch.cat([v, r.reshape(b, h, w, -1)], dim=-1))


class SequencerNet(nn.Module):
    def __init__(self, depth: int, channels: int = 32, hidden: int = 16) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 4, stride=4)
        self.blocks = nn.Sequential(*[Sequencer2D(channels, hidden) for _ in range(depth)])
        self.head = nn.Linear(channels, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.blocks(self.stem(x).permute(0, 2, 3, 1))
        return self.head(y.mean(dim=(1, 2)))


def _child(path: Path, inputs: Path, runs: int, deadline: float) -> dict[str, Any] | str:
    try:
        done = subprocess.run([sys.executable, "-c", CHILD, str(path), str(inputs), str(runs)],
                              capture_output=True, text=True, timeout=deadline)
    except subprocess.TimeoutExpired:
        return f"did not load within {deadline:.0f} s"
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return dict(json.loads(line[7:]))
    return f"failed: {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else done.returncode}"


def measure(depth: int, size: int, rounds: int, runs: int, deadline: float) -> str:
    import t2n

    torch.manual_seed(0)
    model = SequencerNet(depth).eval()
    x = torch.randn(1, 3, size, size)
    with torch.no_grad():
        want = model(x).numpy()
    tmp = Path(tempfile.mkdtemp(prefix="t2n-recurrent-load-"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t2n.export(model, (x,), tmp / "model.nnef.tar", t2n.TractNNEF())
        torch.onnx.export(model, (x,), str(tmp / "model.onnx"), dynamo=False, opset_version=17)
    np.save(tmp / "x.npy", x.numpy())
    files = {"t2n": tmp / "model.nnef.tar", "onnx": tmp / "model.onnx"}
    loads: dict[str, list[float]] = {k: [] for k in files}
    cpus: dict[str, list[float]] = {k: [] for k in files}
    times: dict[str, list[float]] = {k: [] for k in files}
    errors: dict[str, str] = {}
    for _ in range(rounds):
        for side, path in files.items():
            if side in errors:
                continue
            got = _child(path, tmp / "x.npy", runs, deadline)
            if isinstance(got, str):
                errors[side] = got
                continue
            loads[side].append(got["load"])
            cpus[side].append(got["load_cpu"])
            times[side].extend(got["runs"])
            out = np.load(str(tmp / "x.npy") + ".out.npy")
            if not np.allclose(out, want, rtol=1e-3, atol=1e-4):
                errors[side] = f"output differs from PyTorch by {np.abs(out - want).max():.2g}"
    load_avg = os.getloadavg()[0]
    lines = [f"SequencerNet depth {depth}, input 1×3×{size}×{size} ({size // 4}×{size // 4} map, "
             f"{4 * depth} LSTM directions); {rounds} loads each, {runs} runs per load; "
             f"load average {load_avg:.1f}.", "",
             "| artifact | load + optimise s (median) | best | CPU s of the load (median) | run ms (median) | note |",
             "|---|---|---|---|---|---|"]
    for side in files:
        if loads[side]:
            lines.append(f"| {side} | {statistics.median(loads[side]):.3f} | {min(loads[side]):.3f} | "
                         f"{statistics.median(cpus[side]):.3f} | {1000 * statistics.median(times[side]):.2f} | "
                         f"{errors.get(side, '')} |")
        else:
            lines.append(f"| {side} | n/a | n/a | n/a | n/a | {errors.get(side, '')} |")
    if loads["t2n"] and loads["onnx"]:
        ratio = statistics.median(loads["t2n"]) / statistics.median(loads["onnx"])
        cpu_ratio = statistics.median(cpus["t2n"]) / statistics.median(cpus["onnx"])
        run_ratio = statistics.median(times["t2n"]) / statistics.median(times["onnx"])
        lines += ["", f"t2n / ONNX: load {ratio:.2f} (CPU time of the load {cpu_ratio:.2f}), run {run_ratio:.2f}."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--size", type=int, default=56)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--deadline", type=float, default=300.0)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args(argv)
    table = measure(args.depth, args.size, args.rounds, args.runs, args.deadline)
    print(table)
    if args.write:
        command = "python -m benchmarks.recurrent_load " + " ".join(argv if argv is not None else sys.argv[1:])
        RESULTS.write_text(f"# tract load time of a recurrent 2-D model\n\n{table}\n\n`{command.strip()}`\n")


if __name__ == "__main__":
    main()
