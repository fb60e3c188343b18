"""NNEF that t2n did not write, read into the IR and run: a tract-dialect file written by
hand in the style of other exporters (single quotes, a fragment with operator
expressions, ``tract_core_external``), and a standard Khronos file with a fragment; both
run, after reading and writing again, with PyTorch's outputs; the tract one remodelled
too."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import t2n
from t2n.serialize.dat import dat_bytes, read_dat

FIXTURES = Path(__file__).parent / "fixtures"


def _fixture(name: str, tensors: dict[str, tuple[int, ...]], root: Path) -> Path:
    root.mkdir()
    shutil.copy(FIXTURES / name, root / "graph.nnef")
    rng = np.random.default_rng(0)
    for label, shape in tensors.items():
        (root / f"{label}.dat").write_bytes(dat_bytes(rng.standard_normal(shape).astype(np.float32)))
    return root


@pytest.fixture
def tract_file(tmp_path: Path) -> Path:
    return _fixture("tract_hand_written.nnef",
                    {"c.weight": (8, 3, 3), "c.bias": (8,), "l.weight": (4, 8), "l.bias": (4,)}, tmp_path / "t")


def _torch_reference(folder: Path, x: np.ndarray, n: int) -> list[np.ndarray]:
    w = {k: torch.tensor(read_dat(folder / f"{k}.dat")) for k in ("c.weight", "c.bias", "l.weight", "l.bias")}
    h = F.conv1d(torch.tensor(x), w["c.weight"], w["c.bias"], padding=1).transpose(1, 2)
    y = F.gelu(F.linear(h, w["l.weight"], w["l.bias"])).softmax(2)
    return [y.numpy(), (h.sum(1) * n).numpy()]


def test_a_hand_written_tract_file_reads_and_runs(tract_file: Path, tmp_path: Path) -> None:
    model = t2n.read(tract_file)
    assert isinstance(model.target, t2n.TractNNEF)
    iface = model.interface()
    assert [str(i) for i in iface.inputs] == ["x: f32[1, 3, S]", "n: i64[]"]
    assert [str(o) for o in iface.outputs] == ["y: f32[1, S, 4]", "z: f32[1, 8]"]
    assert model.graph.info.properties == {"exporter": "hand-written", "answer": 42}
    model.save(tmp_path / "again.nnef.tgz")
    again = t2n.read(tmp_path / "again.nnef.tgz")
    for size in (1, 6):
        x = np.random.default_rng(size).standard_normal((1, 3, size)).astype(np.float32)
        ref = _torch_reference(tract_file, x, size)
        original = t2n.TractNNEF().run(tract_file, [x, np.array(size)])
        for outs in (original, model.run([x, np.array(size)]), again.run([x, np.array(size)])):
            for got, want in zip(outs, ref):
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_a_hand_written_tract_file_remodelled(tract_file: Path) -> None:
    model = t2n.read(tract_file).remodel({
        "inputs": {"x": {"original_shape": [1, 3, "S"], "collapse_dims": [0]},
                   "n": {"bind_scalar_to_dim_size": "x.S"}},
        "outputs": {"y": {"collapse_dims": [0]}},
        "renamed_symbols": {"frames": ["S"]},
    })
    iface = model.interface()
    assert [str(i) for i in iface.inputs] == ["x: f32[3, frames]"]
    assert [str(o) for o in iface.outputs] == ["y: f32[frames, 4]", "z: f32[1, 8]"]
    for size in (1, 7):
        x = np.random.default_rng(size).standard_normal((3, size)).astype(np.float32)
        ref = _torch_reference(tract_file, x[None], size)
        got = model.run([x])
        np.testing.assert_allclose(got[0], ref[0][0], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(got[1], ref[1], rtol=1e-4, atol=1e-4)


def test_a_hand_written_khronos_file_reads_and_runs(tmp_path: Path) -> None:
    folder = _fixture("khronos_hand_written.nnef", {"filter": (3, 2, 3, 3), "bias": (1, 3)}, tmp_path / "k")
    model = t2n.read(folder)
    assert isinstance(model.target, t2n.KhronosNNEF)
    assert [str(o) for o in model.interface().outputs] == ["output: f32[1, 12]", "pooled: f32[1, 3, 2, 2]"]
    text = model.render().graph_nnef
    assert "fragment scaled_tanh( x: tensor<scalar>, k: scalar = 1.0 )" in text
    assert "extension KHR_enable_fragment_definitions;" in text
    x = np.random.default_rng(1).standard_normal((1, 2, 4, 4)).astype(np.float32)
    w, b = torch.tensor(read_dat(folder / "filter.dat")), torch.tensor(read_dat(folder / "bias.dat"))
    pooled = F.max_pool2d(torch.tanh(0.5 * F.conv2d(torch.tensor(x), w, b[0], padding=1)), 2).numpy()
    out, got_pooled = model.run([x])
    np.testing.assert_allclose(got_pooled, pooled, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out, pooled.reshape(1, -1), rtol=1e-5, atol=1e-6)
