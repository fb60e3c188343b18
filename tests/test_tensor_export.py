"""The public tensor-export helpers: t2n.export_tensors_to_nnef,
t2n.export_tensors_from_disk_to_nnef and t2n.iter_torch_tensors_from_disk."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from safetensors.torch import save_file

import t2n
from t2n.errors import InvalidArgumentError, TensorTooLargeError
from t2n.ir import DType, LazyData
from t2n.serialize.tensors import tensor_file_name, tensor_name_from_file, write_tensors

STATE = {
    "encoder.layer.0.weight": torch.randn(4, 6),
    "encoder.layer.0.bias": torch.randn(4),
    "emb/tokens": torch.randn(5, 2).to(torch.bfloat16),
    "steps": torch.tensor([3, 1], dtype=torch.int64),
    "mask": torch.tensor([True, False, True]),
    ".hidden": torch.ones(2).half(),
}


def _as_written(t, bf16_as=np.float16):
    return t.float().numpy().astype(bf16_as) if t.dtype == torch.bfloat16 else t.numpy()


def _check_folder(written, folder, state, bf16_as=np.float16):
    assert set(written) == set(state)
    files = sorted(os.listdir(folder))
    assert files == sorted(tensor_file_name(n) for n in state)
    for name, w in written.items():
        assert w.path == folder / tensor_file_name(name)
        got = w.read()
        want = _as_written(state[name], bf16_as)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_file_names_are_predictable():
    assert tensor_file_name("encoder.layer.0.weight") == "encoder.layer.0.weight.dat"
    assert tensor_file_name("emb/tokens") == "emb%2Ftokens.dat"
    assert tensor_file_name(".hidden") == "%2Ehidden.dat"
    assert tensor_file_name("a.b%c d") == "a.b%25c%20d.dat"
    with pytest.raises(InvalidArgumentError, match="empty"):
        tensor_file_name("")


@given(st.text(min_size=1, max_size=30))
def test_file_names_are_reversible_and_stay_in_the_folder(name):
    file = tensor_file_name(name)
    assert "/" not in file and "\\" not in file and not file.startswith(".")
    assert tensor_name_from_file(file) == name


def test_export_tensors_to_nnef(tmp_path):
    out = tmp_path / "w"
    written = t2n.export_tensors_to_nnef(STATE, out)
    _check_folder(written, out, STATE)
    assert written["emb/tokens"].dtype is DType.F16 and written["emb/tokens"].source_dtype is DType.BF16
    written = t2n.export_tensors_to_nnef({"emb/tokens": STATE["emb/tokens"]}, tmp_path / "f32", bf16_as="f32")
    np.testing.assert_array_equal(written["emb/tokens"].read(), STATE["emb/tokens"].float().numpy())


def test_non_contiguous_and_numpy_inputs(tmp_path):
    base = torch.randn(6, 8)
    state = {"t": base.t(), "sliced": base[::2, 1::3], "np": np.arange(10, dtype=np.int32)}
    written = t2n.export_tensors_to_nnef(state, tmp_path)
    np.testing.assert_array_equal(written["t"].read(), base.t().numpy())
    np.testing.assert_array_equal(written["sliced"].read(), base[::2, 1::3].numpy())
    np.testing.assert_array_equal(written["np"].read(), state["np"])


def test_failure_leaves_the_folder_as_it_was(tmp_path):
    out = tmp_path / "w"
    out.mkdir()
    (out / "other.dat").write_bytes(b"mine")
    (out / "a.dat").write_bytes(b"old")

    def boom(n):
        yield np.zeros(4, np.float32)
        raise OSError("disk full")

    bad = LazyData(DType.F32, (8,), load=lambda: np.zeros(8, np.float32), chunks=boom)
    with pytest.raises(OSError, match="disk full"):
        write_tensors({"a": LazyData(DType.F32, (2,), load=lambda: np.ones(2, np.float32)), "b": bad}, out)
    assert sorted(os.listdir(out)) == ["a.dat", "other.dat"]
    assert (out / "a.dat").read_bytes() == b"old"
    huge = LazyData(DType.F32, (1 << 31,), load=lambda: pytest.fail("read"))
    with pytest.raises(TensorTooLargeError):
        write_tensors({"a": LazyData(DType.F32, (2,), load=lambda: np.ones(2, np.float32)), "h": huge},
                      tmp_path / "new")
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("fmt", ["safetensors", "pt", "legacy.pt", "bin"])
def test_export_from_disk(tmp_path, fmt):
    path = tmp_path / f"ckpt.{fmt}"
    if fmt == "safetensors":
        save_file({k: v.contiguous() for k, v in STATE.items()}, path)
    else:
        torch.save(STATE, path, _use_new_zipfile_serialization=fmt != "legacy.pt")
    seen = {}

    def check(found):
        seen.update(found)
        return True

    out = tmp_path / "out"
    written = t2n.export_tensors_from_disk_to_nnef(path, out, fn_check_found_tensors=check)
    _check_folder(written, out, STATE)
    assert set(seen) == set(STATE)
    assert all(t.device.type == "meta" for t in seen.values())
    assert seen["emb/tokens"].dtype == torch.bfloat16 and tuple(seen["emb/tokens"].shape) == (5, 2)


def test_filter_and_refusal(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    save_file({k: v.contiguous() for k, v in STATE.items()}, path)
    written = t2n.export_tensors_from_disk_to_nnef(path, tmp_path / "enc", filter_key=lambda n: n.startswith("encoder."))
    assert sorted(written) == ["encoder.layer.0.bias", "encoder.layer.0.weight"]
    with pytest.raises(InvalidArgumentError, match="rejected"):
        t2n.export_tensors_from_disk_to_nnef(path, tmp_path / "no", fn_check_found_tensors=lambda f: False)
    assert not (tmp_path / "no").exists()


def test_nested_checkpoints_are_flattened(tmp_path):
    path = tmp_path / "ckpt.pt"
    torch.save({"model": {"w": torch.ones(2)}, "epoch": 3, "hist": [torch.zeros(1)]}, path)
    names = [n for n, _ in t2n.iter_torch_tensors_from_disk(path)]
    assert names == ["model.w", "hist.0"]


@pytest.mark.parametrize("fmt", ["safetensors", "pt"])
def test_iter_tensors_from_disk(tmp_path, fmt):
    path = tmp_path / f"ckpt.{fmt}"
    state = {k: v.contiguous() for k, v in STATE.items()}
    if fmt == "safetensors":
        save_file(state, path)
    else:
        torch.save(state, path)
    it = t2n.iter_torch_tensors_from_disk(path, filter_key=lambda n: n != "mask")
    first = next(it)  # a generator: tensors come one at a time
    got = dict([first, *it])
    assert set(got) == set(state) - {"mask"}
    for name, t in got.items():
        assert t.dtype == state[name].dtype
        assert torch.equal(t, state[name])


def test_peak_memory_stays_near_one_tensor(tmp_path):
    """Exporting 8 tensors of 16 MiB from safetensors and from a mapped .pt raises the
    peak resident memory by well under the 128 MiB they hold together."""
    state = {f"w{i}": torch.randn(4 << 20) for i in range(8)}
    save_file(state, tmp_path / "c.safetensors")
    torch.save(state, tmp_path / "c.pt")
    del state
    script = textwrap.dedent(f"""
        import resource, t2n, torch
        rss = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10
        for fmt in ("safetensors", "pt"):
            before = rss()
            t2n.export_tensors_from_disk_to_nnef({str(tmp_path)!r} + "/c." + fmt, {str(tmp_path)!r} + "/o_" + fmt)
            print(fmt, rss() - before)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    growth = dict(line.split() for line in done.stdout.split("\n") if line)
    assert int(growth["safetensors"]) < 64, growth
    assert int(growth["pt"]) < 64, growth
