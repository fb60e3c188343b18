"""Tensors that lie as they are in a safetensors file are copied file to file
(``os.copy_file_range``, or read and written where that is refused): the same bytes as
writing them from memory, in folders, tars and compressed tars."""

import errno
import filecmp
import os

import pytest
import torch
from safetensors.torch import save_file

import t2n
from t2n.errors import CorruptTensorFileError
from t2n.ir.tensor_data import FileRegion
from t2n.serialize.archive import read_artifact
from t2n.serialize.dat import iter_dat
from t2n.serialize.safetensors_reader import open_safetensors


def _tensors():
    g = torch.Generator().manual_seed(0)
    return {
        "a.weight": torch.randn(64, 33, generator=g),
        "b.bias": torch.randn(7, generator=g).half(),
        "c.mask": torch.rand(5, 3, generator=g) > 0.5,  # bool: bit-packed, never a region
        "d.ids": torch.arange(12, dtype=torch.int64).reshape(3, 4),
        "e.bf16": torch.randn(9, 2, generator=g).bfloat16(),
    }


def _files(folder):
    return sorted(p.name for p in folder.iterdir())


@pytest.fixture
def checkpoint(tmp_path):
    path = tmp_path / "m.safetensors"
    save_file(_tensors(), path)
    return path


def test_regions_only_where_the_bytes_are_the_payload(checkpoint):
    lazy = {n: d for n, d in open_safetensors(checkpoint).items() if n != "e.bf16"}  # bf16 is converted
    kinds = {n: [type(c) for c in iter_dat(d, regions=True)][1:] for n, d in lazy.items()}
    assert kinds["a.weight"] == [FileRegion]
    assert kinds["d.ids"] == [FileRegion]
    assert FileRegion not in kinds["c.mask"]
    assert all(FileRegion not in [type(c) for c in iter_dat(d)] for d in lazy.values())  # not asked for


@pytest.mark.parametrize("refuse_kernel_copy", [False, True])
def test_same_files_as_from_memory(tmp_path, checkpoint, monkeypatch, refuse_kernel_copy):
    if refuse_kernel_copy:
        def refuse(*_a, **_k):
            raise OSError(errno.EXDEV, "cross-device copy refused")
        monkeypatch.setattr(os, "copy_file_range", refuse)
    t2n.export_tensors_to_nnef(_tensors(), tmp_path / "mem", bf16_as="f32")
    t2n.export_tensors_from_disk_to_nnef(checkpoint, tmp_path / "disk")
    names = _files(tmp_path / "mem")
    assert names == _files(tmp_path / "disk")
    # bf16 is converted in both (f16 by default from disk): compare the others byte for byte
    same = [n for n in names if not n.startswith("e.bf16")]
    match, mismatch, errors = filecmp.cmpfiles(tmp_path / "mem", tmp_path / "disk", same, shallow=False)
    assert match == same and not mismatch and not errors


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 8)
        self.out = torch.nn.Linear(8, 4)

    def forward(self, x):
        return self.out(torch.relu(self.lin(x)))


@pytest.mark.parametrize("suffix", [".nnef.tar", ".nnef.tgz", ""])
def test_weights_from_a_checkpoint_into_every_archive_form(tmp_path, suffix):
    torch.manual_seed(0)
    model = Net().eval()
    x = torch.randn(2, 16)
    ckpt = tmp_path / "w.safetensors"
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, ckpt)
    with torch.device("meta"):
        structure = Net().eval()
    from_disk = t2n.compile(structure, (x,), weights_from=ckpt)
    from_disk.save(tmp_path / f"disk{suffix or '_dir'}")
    t2n.compile(model, (x,)).save(tmp_path / f"mem{suffix or '_dir'}")
    assert read_artifact(tmp_path / f"disk{suffix or '_dir'}") == read_artifact(tmp_path / f"mem{suffix or '_dir'}")
    with torch.no_grad():
        expected = model(x).numpy()
    from_disk.check(inputs=[x.numpy()], expected=[expected])


def test_a_checkpoint_cut_short_after_opening_is_refused(tmp_path, checkpoint):
    lazy = open_safetensors(checkpoint)
    weight = lazy["a.weight"]
    os.truncate(checkpoint, weight.region.offset + 1000)  # its bytes end early now
    with pytest.raises(CorruptTensorFileError, match="truncated"):
        t2n.export_tensors_to_nnef({"a.weight": weight}, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    with pytest.raises(CorruptTensorFileError, match="truncated"):
        _tar_from({"a.weight": weight}, tmp_path / "t.tar")
    assert not (tmp_path / "t.tar").exists()


def _tar_from(lazy, path):
    from t2n.serialize.archive import open_writer
    from t2n.serialize.dat import dat_size

    with open_writer(path) as w:
        for name, data in lazy.items():
            w.add_stream(name + ".dat", dat_size(data), iter_dat(data, regions=True))
