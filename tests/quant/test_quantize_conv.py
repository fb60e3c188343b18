"""Q4_0 convolution weights: ``t2n.quantize`` picks Conv1d/Conv2d weights, and tract runs
them as 4-bit blocks (``conv`` packs the filter per group), checked against PyTorch on
the dequantized weights."""

from __future__ import annotations

import logging
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
import tract
from torch import nn

import t2n
from t2n.serialize.dat import read_dat

Q4_0_ITEM = (0xFFFFFFFF, 0x54523040)


def item_type(path: Path) -> tuple[int, int]:
    with open(path, "rb") as f:
        return struct.unpack_from("<II", f.read(128), 44)


def q4_0_files(folder: Path) -> set[str]:
    return {p.name for p in folder.glob("*.dat") if item_type(p) == Q4_0_ITEM}


class ConvNet(nn.Module):
    """Conv2d (strided, dilated, grouped), a depthwise Conv2d whose rows (9 values) do not
    split into blocks, Conv1d and a Linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(32, 64, 3, stride=2, padding=1)
        self.grouped = nn.Conv2d(64, 64, 3, padding=2, dilation=2, groups=2)
        self.depthwise = nn.Conv2d(64, 64, 3, padding=1, groups=64)
        self.mix = nn.Conv1d(64, 32, 1)
        self.head = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.stem(x))
        y = torch.relu(self.grouped(y))
        y = self.depthwise(y)
        y = self.mix(y.flatten(2))
        return self.head(y.mean(-1))


def quantized(recipe: str = "min_max_q4_0") -> ConvNet:
    torch.manual_seed(0)
    return t2n.quantize(ConvNet().eval(), recipe)


def test_recipe_quantizes_conv_weights_and_tract_runs_the_blocks(tmp_path: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    torch.manual_seed(0)
    model = ConvNet().eval()
    before = model.stem.weight.detach().clone()
    with caplog.at_level(logging.INFO, logger="t2n"):
        t2n.quantize(model, "min_max_q4_0")
        art = t2n.compile(model, (torch.randn(2, 32, 12, 12),), t2n.TractNNEF())
    assert not torch.equal(before, model.stem.weight)
    report = art.check()  # tract on the 4-bit blocks vs PyTorch on the dequantized weights
    assert report.ok
    art.save(tmp_path / "m")
    assert q4_0_files(tmp_path / "m") == {"stem.weight.dat", "grouped.weight.dat", "mix.weight.dat",
                                          "head.weight.dat"}
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "depthwise.weight stays in float" in text
    assert "written in float" not in text
    w = read_dat(tmp_path / "m" / "grouped.weight.dat")  # the file holds the model's values
    assert np.array_equal(w, model.grouped.weight.detach().numpy())
    size_q4 = (tmp_path / "m" / "stem.weight.dat").stat().st_size
    assert size_q4 == 128 + 64 * (32 * 9 // 32) * 18


def test_symbolic_spatial_axes_and_f16_activations(tmp_path: Path) -> None:
    model = quantized()
    art = t2n.compile(model, (torch.randn(1, 32, 10, 14),), t2n.TractNNEF(),
                      dynamic_axes={"input_0": {2: "H", 3: "W"}})
    for h, w in ((10, 14), (7, 21)):
        x = torch.randn(1, 32, h, w)
        with torch.no_grad():
            want = model(x)
        assert art.check(inputs=[x.numpy()], expected=[want.numpy()]).ok
    half = quantized().half()
    art16 = t2n.compile(half, (torch.randn(1, 32, 8, 8).half(),), t2n.TractNNEF())
    art16.save(tmp_path / "h")
    assert "stem.weight.dat" in q4_0_files(tmp_path / "h")
    x = torch.randn(1, 32, 8, 8)
    got = tract.nnef().load(str(tmp_path / "h")).into_runnable().run([x.half().numpy()])[0]
    got = got.to_numpy().astype(np.float32)
    with torch.no_grad():
        ref = quantized()(x).numpy()  # the same Q4_0 values in f32
    assert np.abs(got - ref).max() < 0.05 * max(1.0, float(np.abs(ref).max()))


def test_explicit_conv_tensors_and_a_conv_weight_read_elsewhere(tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    class Shared(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv1d(32, 16, 2)
            self.other = nn.Conv1d(32, 16, 2)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            y = self.other(x)  # and a transposed convolution reads the same weight: no blocks
            return self.conv(x) + y, nn.functional.conv_transpose1d(y, self.other.weight)

    torch.manual_seed(0)
    model = t2n.quantize(Shared().eval(), "min_max_q4_0", tensors=["conv.weight", "other.weight"])
    with caplog.at_level(logging.INFO, logger="t2n.quant"):
        art = t2n.compile(model, (torch.randn(1, 32, 9),), t2n.TractNNEF())
    assert art.check().ok
    art.save(tmp_path / "m")
    assert q4_0_files(tmp_path / "m") == {"conv.weight.dat"}
    assert "'other.weight' is written in float" in caplog.text


def test_export_writes_conv_weights_as_blocks(tmp_path: Path) -> None:
    import tarfile

    t2n.export(quantized(), (torch.randn(1, 32, 12, 12),), tmp_path / "m.nnef.tar", t2n.TractNNEF(),
               check_io=True)
    with tarfile.open(tmp_path / "m.nnef.tar") as tar:
        blocks = set()
        for member in tar.getmembers():
            head = tar.extractfile(member).read(128) if member.name.endswith(".dat") else b""  # type: ignore[union-attr]
            if head and struct.unpack_from("<II", head, 44) == Q4_0_ITEM:
                blocks.add(member.name)
    assert blocks == {"stem.weight.dat", "grouped.weight.dat", "mix.weight.dat", "head.weight.dat"}
