"""``t2n.export``: weights written while the model compiles, checked against the
compiled artifact, taken back where it disagrees; the result is byte for byte what
``compile(...).save(...)`` writes, and failures leave nothing behind."""

import errno
import filecmp
import tarfile

import numpy as np
import pytest
import torch

import t2n
from t2n.errors import UnsupportedOpsError
from t2n.serialize.archive import TarWriter, open_writer
from t2n.serialize.dat import read_dat
from t2n.serialize.overlap import EarlyWriter, PlannedTensor, ordered_like


class Mlp(torch.nn.Module):
    def __init__(self, dtype=torch.float32):
        super().__init__()
        torch.manual_seed(0)
        self.up = torch.nn.Linear(16, 64).to(dtype)
        self.norm = torch.nn.LayerNorm(64).to(dtype)
        self.down = torch.nn.Linear(64, 8).to(dtype)

    def forward(self, x):
        return self.down(self.norm(torch.relu(self.up(x))))


class BnNet(torch.nn.Sequential):
    """Its first conv's weight is folded with the batch norm: the early member is wrong."""

    def __init__(self):
        torch.manual_seed(0)
        super().__init__(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.Conv2d(8, 4, 3))
        self[1].running_mean.uniform_(-1, 1)
        self[1].running_var.uniform_(0.5, 2)


X = torch.randn(2, 16)


@pytest.fixture(autouse=True)
def _early_writes_finish_first(monkeypatch):
    """Every planned tensor is written early before the compile's list is checked, so
    that what is kept does not depend on how fast the compile was."""
    finish = EarlyWriter.finish
    monkeypatch.setattr(EarlyWriter, "finish",
                        lambda self, final, **kw: finish(self, final, write_all_planned=True, **kw))


def _members(path):
    with tarfile.open(path) as tar:
        return [(m.name, tar.extractfile(m).read()) for m in tar.getmembers()]


@pytest.mark.parametrize("suffix", [".tar", ""])
def test_export_writes_what_compile_then_save_writes(tmp_path, suffix):
    model = Mlp().eval()
    art = t2n.export(model, (X,), tmp_path / f"e{suffix}", check_io=True)
    t2n.compile(model, (X,)).save(tmp_path / f"s{suffix}")
    if suffix:
        assert filecmp.cmp(tmp_path / "e.tar", tmp_path / "s.tar", shallow=False)
        names = [n for n, _ in _members(tmp_path / "e.tar")]
        assert names == ["up.weight.dat", "up.bias.dat", "norm.weight.dat", "norm.bias.dat",
                         "down.weight.dat", "down.bias.dat", "graph.nnef"]
    else:
        files = sorted(p.relative_to(tmp_path / "e").as_posix() for p in (tmp_path / "e").rglob("*"))
        assert files == sorted(p.relative_to(tmp_path / "s").as_posix() for p in (tmp_path / "s").rglob("*"))
        for f in files:
            assert (tmp_path / "e" / f).read_bytes() == (tmp_path / "s" / f).read_bytes()
    assert art.stats["overlap"] == {"planned": 6, "kept": 6, "kept_bytes": art.stats["overlap"]["kept_bytes"],
                                    "written_early": 6}
    assert art.stats["overlap"]["kept_bytes"] == sum(
        128 + t.numel() * 4 for t in model.parameters())
    assert art.saved_path == tmp_path / f"e{suffix}"


def test_folded_weights_are_taken_back_and_rewritten(tmp_path):
    model = BnNet().eval()
    x = torch.rand(1, 3, 12, 12)
    art = t2n.export(model, (x,), tmp_path / "e.tar", check_io=True)
    assert art.stats["overlap"]["kept"] == 0 and art.stats["overlap"]["written_early"] > 0
    t2n.compile(model, (x,)).save(tmp_path / "s.tar")
    assert filecmp.cmp(tmp_path / "e.tar", tmp_path / "s.tar", shallow=False)
    # the folded weight, not the model's own, is in the archive
    members = dict(_members(tmp_path / "e.tar"))
    (tmp_path / "w.dat").write_bytes(members["0.weight.dat"])
    assert not np.array_equal(read_dat(tmp_path / "w.dat"), model[0].weight.detach().numpy())


def test_weight_modified_during_compile_is_rewritten(tmp_path, monkeypatch):
    """Written early, then changed in place before the compile ends: its version counter
    says so, and the archive holds the new values."""
    from t2n.frontend.jit import frontend as jit_frontend

    model = Mlp().eval()
    lower_ = jit_frontend.lower

    def lower_then_edit(*args, **kwargs):
        graph = lower_(*args, **kwargs)
        with torch.no_grad():
            model.up.weight.mul_(2.0)
        return graph

    monkeypatch.setattr(jit_frontend, "lower", lower_then_edit)
    art = t2n.export(model, (X,), tmp_path / "e.tar")
    assert art.stats["overlap"]["kept"] == 0 and art.stats["overlap"]["written_early"] == 6
    members = dict(_members(tmp_path / "e.tar"))
    (tmp_path / "w.dat").write_bytes(members["up.weight.dat"])
    np.testing.assert_array_equal(read_dat(tmp_path / "w.dat"), model.up.weight.detach().numpy())


def test_bf16_weights_overlap_through_their_conversion(tmp_path):
    model = Mlp(torch.bfloat16).eval()
    x = X.to(torch.bfloat16)
    art = t2n.export(model, (x,), tmp_path / "e.tar")
    assert art.stats["overlap"]["kept"] == 6
    t2n.compile(model, (x,)).save(tmp_path / "s.tar")
    assert filecmp.cmp(tmp_path / "e.tar", tmp_path / "s.tar", shallow=False)
    members = dict(_members(tmp_path / "e.tar"))
    (tmp_path / "w.dat").write_bytes(members["up.weight.dat"])
    np.testing.assert_array_equal(read_dat(tmp_path / "w.dat"),
                                  model.up.weight.detach().to(torch.float16).numpy())


def test_tgz_and_no_overlap_give_the_same_members(tmp_path):
    model = Mlp().eval()
    t2n.export(model, (X,), tmp_path / "s.tar")
    art = t2n.export(model, (X,), tmp_path / "z.tgz")
    assert art.stats["overlap"]["planned"] == 0  # compressed after compiling
    assert _members(tmp_path / "z.tgz") == _members(tmp_path / "s.tar")
    art = t2n.export(model, (X,), tmp_path / "n.tar", overlap=False)
    assert art.stats["overlap"]["planned"] == 0
    assert filecmp.cmp(tmp_path / "n.tar", tmp_path / "s.tar", shallow=False)


def test_failed_compile_leaves_nothing(tmp_path):
    class Bad(Mlp):
        def forward(self, x):
            return torch.fft.fft(super().forward(x)).exp().real  # exp of a complex tensor

    with pytest.raises(UnsupportedOpsError):
        t2n.export(Bad().eval(), (X,), tmp_path / "bad.tar")
    assert list(tmp_path.iterdir()) == []


def test_interrupted_export_leaves_nothing(tmp_path, monkeypatch):
    import t2n.driver.export

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(t2n.driver.export, "compile_model", interrupted)
    with pytest.raises(KeyboardInterrupt):
        t2n.export(Mlp().eval(), (X,), tmp_path / "m.tar")
    assert list(tmp_path.iterdir()) == []


def test_disk_full_while_writing_early_fails_the_export_and_leaves_nothing(tmp_path, monkeypatch):
    calls = []
    add = TarWriter.add_stream

    def full_disk(self, name, size, chunks):
        calls.append(name)
        if name == "down.weight.dat":
            raise OSError(errno.ENOSPC, "No space left on device")
        add(self, name, size, chunks)

    monkeypatch.setattr(TarWriter, "add_stream", full_disk)
    with pytest.raises(OSError, match="No space left"):
        t2n.export(Mlp().eval(), (X,), tmp_path / "m.tar")
    assert "down.weight.dat" in calls
    assert list(tmp_path.iterdir()) == []


def _planned(name, arr):
    from t2n.ir import ArrayData

    data = ArrayData(arr)
    return PlannedTensor(f"{name}.dat", data, data.dtype)


def test_rollback_keeps_the_confirmed_prefix(tmp_path):
    """Early members a, b, c; the final list confirms a, drops b, keeps c: the archive is
    cut back after a, and b is never in it."""
    from t2n.backends.nnef.context import TensorFile

    arrays = {n: np.full((4, 4), i, np.float32) for i, n in enumerate("abc")}
    planned = [_planned(n, a) for n, a in arrays.items()]
    w = open_writer(tmp_path / "m.tar")
    early = EarlyWriter(w, planned)
    early.start()
    final = [TensorFile(n, p.data, p.dtype) for n, p in zip("ac", (planned[0], planned[2]))]
    extra = TensorFile("d", _planned("d", np.zeros(2, np.float32)).data, t2n.ir.DType.F32)
    rest = early.finish([extra, *final])
    assert early.kept == 1
    assert [f.path for f in rest] == ["c.dat", "d.dat"]
    for f in rest:
        w.add_bytes(f.path, b"x")
    w.commit()
    assert [n for n, _ in _members(tmp_path / "m.tar")] == ["a.dat", "c.dat", "d.dat"]


def test_ordered_like_puts_planned_first():
    from types import SimpleNamespace as S

    final = [S(path=p) for p in ["z.dat", "b.dat", "a.dat", "k.dat"]]
    assert [f.path for f in ordered_like(final, ["a.dat", "q.dat", "b.dat"])] == ["a.dat", "b.dat", "z.dat", "k.dat"]


def test_weights_from_disk_are_written_while_compiling(tmp_path):
    """A model on the meta device with its weights in a safetensors file: the file's
    tensors stream into the archive during the compile, bf16 converted on the way."""
    from safetensors.torch import save_file

    real = Mlp(torch.bfloat16).eval()
    save_file({k: v.contiguous() for k, v in real.state_dict().items()}, tmp_path / "w.safetensors")
    with torch.device("meta"):
        meta = Mlp(torch.bfloat16).eval()
    x = X.to(torch.bfloat16)
    art = t2n.export(meta, (x,), tmp_path / "e.tar", weights_from=tmp_path / "w.safetensors")
    assert art.stats["overlap"]["kept"] == art.stats["overlap"]["planned"] == 6
    t2n.compile(meta, (x,), weights_from=tmp_path / "w.safetensors").save(tmp_path / "s.tar")
    assert filecmp.cmp(tmp_path / "e.tar", tmp_path / "s.tar", shallow=False)
    with torch.no_grad():
        expected = real(x).to(torch.float16).numpy()
    art.check(inputs=[x.to(torch.float16).numpy()], expected=[expected], tolerance="loose")


def test_export_restores_torch_threads_and_the_garbage_collector(tmp_path):
    """The compile pauses the cyclic GC and export lends one core to the writer: both
    are given back, after a success and after a failure."""
    import gc

    class Bad(Mlp):
        def forward(self, x):
            return torch.fft.fft(super().forward(x)).exp().real  # exp of a complex tensor

    threads = torch.get_num_threads()
    assert gc.isenabled()
    t2n.export(Mlp().eval(), (X,), tmp_path / "m.tar")
    assert torch.get_num_threads() == threads and gc.isenabled()
    with pytest.raises(UnsupportedOpsError):
        t2n.export(Bad().eval(), (X,), tmp_path / "bad.tar")
    assert torch.get_num_threads() == threads and gc.isenabled()


def _covered(calls):
    """The byte ranges the kernel was asked to write back, merged."""
    merged = []
    for start, end in sorted((o, o + n) for o, n, _ in calls):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged


def test_synced_tars_start_the_disk_writing_as_they_go(tmp_path, monkeypatch):
    """With sync=True, a tar asks the kernel to start writing back each range as soon as
    it is written, over the whole archive (so the disk works during the compile of
    ``export`` and while a save goes on); without sync it never does."""
    import os

    import t2n.serialize.region_io as region_io

    if not hasattr(os, "posix_fadvise"):
        pytest.skip("no posix_fadvise here")
    calls = []
    real = os.posix_fadvise

    def record(fd, offset, length, advice):
        calls.append((offset, length, advice))
        real(fd, offset, length, advice)

    monkeypatch.setattr(os, "posix_fadvise", record)
    monkeypatch.setattr(region_io, "KICK_BYTES", 1)
    model = Mlp().eval()
    art = t2n.export(model, (X,), tmp_path / "e.tar", sync=True)
    assert art.stats["overlap"]["kept"] == 6
    assert calls and all(advice == os.POSIX_FADV_DONTNEED for _, _, advice in calls)
    assert _covered(calls) == [[0, (tmp_path / "e.tar").stat().st_size]]
    calls.clear()
    t2n.compile(model, (X,)).save(tmp_path / "s.tar", sync=True)
    assert _covered(calls) == [[0, (tmp_path / "s.tar").stat().st_size]]
    calls.clear()
    t2n.compile(model, (X,)).save(tmp_path / "u.tar")
    assert calls == []
    assert filecmp.cmp(tmp_path / "e.tar", tmp_path / "s.tar", shallow=False)
    assert filecmp.cmp(tmp_path / "e.tar", tmp_path / "u.tar", shallow=False)
