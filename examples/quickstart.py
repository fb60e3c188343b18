"""Export a small Conv1d network to NNEF, run it in tract and compare with PyTorch.

    python examples/quickstart.py [output path]   (default: quickstart.nnef.tgz)
"""

from __future__ import annotations

import sys

import torch

import t2n


def main(path: str = "quickstart.nnef.tgz") -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv1d(10, 20, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(20 * 98, 5)
    ).eval()
    x = torch.rand(1, 10, 100)
    artifact = t2n.compile(model, (x,), t2n.TractNNEF("0.23.9"), input_names=["inp"], output_names=["out"])
    saved = artifact.save(path)
    print(f"wrote {saved}\n")
    print(artifact.graph_nnef)
    report = artifact.check()
    print(report)
    khronos = t2n.compile(model, (x,), t2n.KhronosNNEF("1.0.5"), input_names=["inp"], output_names=["out"])
    print(khronos.check())


if __name__ == "__main__":
    main(*sys.argv[1:])
