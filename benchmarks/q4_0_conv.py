"""Q4_0 convolutions in tract: artifact size and run time of a small convolutional
network with f32 weights and with its convolution and linear weights as Q4_0 blocks.

The network (:class:`ConvNet`: a 4×4 patch stem, three stages of two 3×3 convolutions
with a strided 3×3 between stages, a 1×1 projection and a linear head; 2.0 M
parameters) is exported twice by t2n: as it is (f32), and after
``t2n.quantize(model, "min_max_q4_0")`` (every Conv2d and Linear weight whose rows split
into blocks of 32; the 3-channel stem stays f32). Each artifact is a ``.nnef.tar``;
tract (Python wheel) loads each once per round and runs it ``--runs`` times, the two
alternating round by round so that other load on the machine slows both alike. Each
output is compared with its own PyTorch model (the Q4_0 one computes with the
dequantized weights).

``python -m benchmarks.q4_0_conv [--size 128] [--rounds 5] [--runs 20] [--write]``
prints a Markdown section; ``--write`` puts it in ``benchmarks/RESULTS_Q4_0.md``
(below the part ``benchmarks.quant`` writes, replacing an earlier copy of itself).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from torch import nn

RESULTS = Path(__file__).with_name("RESULTS_Q4_0.md")
BEGIN = "<!-- benchmarks.q4_0_conv: begin -->"
END = "<!-- benchmarks.q4_0_conv: end -->"


class ConvNet(nn.Module):
    def __init__(self, width: int = 64) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Conv2d(3, width, 4, stride=4), nn.ReLU()]
        c = width
        for stage in range(3):
            if stage:
                layers += [nn.Conv2d(c, 2 * c, 3, stride=2, padding=1), nn.ReLU()]
                c *= 2
            layers += [nn.Conv2d(c, c, 3, padding=1), nn.ReLU(), nn.Conv2d(c, c, 3, padding=1), nn.ReLU()]
        layers += [nn.Conv2d(c, c, 1)]
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(c, 100)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).mean(dim=(2, 3)))


def _time_runs(runnable: object, x: np.ndarray, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        runnable.run([x])  # type: ignore[attr-defined]
        out.append(time.perf_counter() - start)
    return out


def measure(size: int, rounds: int, runs: int) -> str:
    import tract

    import t2n

    torch.manual_seed(0)
    models = {"f32": ConvNet().eval()}
    torch.manual_seed(0)
    models["q4_0"] = t2n.quantize(ConvNet().eval(), "min_max_q4_0")
    x = torch.randn(1, 3, size, size)
    tmp = Path(tempfile.mkdtemp(prefix="t2n-q4-conv-"))
    paths, errors = {}, {}
    for name, model in models.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t2n.export(model, (x,), tmp / f"{name}.nnef.tar", t2n.TractNNEF())
        paths[name] = tmp / f"{name}.nnef.tar"
        with torch.no_grad():
            want = model(x).numpy()
        got = tract.nnef().load(str(paths[name])).into_runnable().run([x.numpy()])[0].to_numpy()
        errors[name] = float(np.abs(got - want).max())
    loads: dict[str, list[float]] = {k: [] for k in paths}
    times: dict[str, list[float]] = {k: [] for k in paths}
    for _ in range(rounds):
        for name, path in paths.items():
            start = time.perf_counter()
            runnable = tract.nnef().load(str(path)).into_runnable()
            loads[name].append(time.perf_counter() - start)
            runnable.run([x.numpy()])
            times[name] += _time_runs(runnable, x.numpy(), runs)
    params = sum(p.numel() for p in models["f32"].parameters())
    lines = [BEGIN, "## Q4_0 convolutions, small convolutional network", "",
             f"`ConvNet` ({params / 1e6:.2f} M parameters: 4×4 patch stem, three stages of 3×3 "
             f"convolutions, 1×1 projection, linear head), input 1×3×{size}×{size}; `min_max_q4_0` "
             "makes every Conv2d and Linear weight but the 3-channel stem's Q4_0. "
             f"{rounds} loads per artifact, {runs} runs after each, alternating; "
             f"load average {os.getloadavg()[0]:.1f} at the end.", "",
             "| artifact | size | load s (median) | run ms (median) | best | vs f32 | max abs err vs PyTorch |",
             "|---|---|---|---|---|---|---|"]
    base = statistics.median(times["f32"])
    for name, path in paths.items():
        med = statistics.median(times[name])
        lines.append(f"| {name} | {path.stat().st_size / 2**20:.2f} MiB | {statistics.median(loads[name]):.3f} | "
                     f"{1000 * med:.2f} | {1000 * min(times[name]):.2f} | {med / base:.2f} | {errors[name]:.2e} |")
    ratio = paths["q4_0"].stat().st_size / paths["f32"].stat().st_size
    lines += ["", f"The Q4_0 artifact is {ratio:.3f} of the f32 one.", "",
              f"`python -m benchmarks.q4_0_conv --size {size} --rounds {rounds} --runs {runs}`", END]
    return "\n".join(lines)


def write(section: str) -> None:
    text = RESULTS.read_text() if RESULTS.exists() else ""
    if BEGIN in text and END in text:
        text = text[: text.index(BEGIN)] + section + text[text.index(END) + len(END):]
    else:  # below the line benchmarks.quant keeps what follows
        keep = "<!-- benchmarks.quant replaces everything above this line and keeps what follows -->"
        text = text.rstrip("\n") + "\n\n" + ("" if keep in text else keep + "\n\n") + section + "\n"
    RESULTS.write_text(text)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args(argv)
    section = measure(args.size, args.rounds, args.runs)
    print(section)
    if args.write:
        write(section)


if __name__ == "__main__":
    main()
