"""What used to be accepted without a word now says so, or is refused.

Cases tried (18): outputs that are not tensors (a string in a tuple, a number, a
string in a dict, an object holding tensors, through ``compile`` with both frontends and ``t2n.export``) are
dropped with a ``NonTensorOutputWarning`` naming them (``None`` stays silent); a
model in training mode (dropout, batch norm) is exported as in eval mode, as
documented, with a ``TrainingModeWarning`` and its flags restored, through both
frontends, and a ScriptModule in training mode likewise (it was exported with
dropout's randomness and failed its check); a zip ``.pt`` with bytes flipped inside a
tensor (loaded silently wrong before) is refused by its CRCs through ``weights_from``,
``export_tensors_from_disk_to_nnef``, ``iter_torch_tensors_from_disk``, ``t2n
tensors`` and ``t2n export FILE.pt`` (a TorchScript file); ``t2n inspect`` on a
``graph.nnef`` whose version line is tampered (``versio 1.0``, ``version one``,
``version 9.9``, none) or whose output is never assigned, or whose input is never
declared, exits 1 naming the problem.
"""

from __future__ import annotations

import re
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

import t2n
from t2n.errors import CorruptTensorFileError
from t2n.frontend.io import NonTensorOutputWarning
from t2n.frontend.trace import TrainingModeWarning

X = torch.rand(4, 8)


def _caught(fn, category):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        result = fn()
    return result, [str(w.message) for w in seen if issubclass(w.category, category)]


class WithText(torch.nn.Module):
    def __init__(self, extra):
        super().__init__()
        self.extra = extra

    def forward(self, x):
        y = x * 2
        if isinstance(self.extra, dict):
            return {"y": y, **self.extra}
        return y, self.extra


@pytest.mark.parametrize("frontend", ["jit", "export"])
@pytest.mark.parametrize("extra, named", [("hello", "output 1 is a str ('hello')"), (3, "output 1 is an int (3)"),
                                          ({"msg": "ok"}, "output msg is a str ('ok')")],
                         ids=["str", "int", "dict_str"])
def test_a_non_tensor_output_is_dropped_with_a_note(frontend, extra, named):
    art, notes = _caught(lambda: t2n.compile(WithText(extra), (X,), frontend=frontend), NonTensorOutputWarning)
    assert len(art.output_names) == 1 and any(named in n for n in notes), notes


class Cache:
    """An object holding tensors, of a class torch's pytree does not know (like
    transformers' ``DynamicCache``, returned by decoders called with their defaults)."""

    def __init__(self, keys):
        self.keys = keys


class ReturnsACache(torch.nn.Module):
    def forward(self, x):
        return {"y": x * 2, "cache": Cache([x + 1])}


@pytest.mark.parametrize("frontend", ["jit", "export"])
def test_an_object_output_is_dropped_with_a_note_on_both_frontends(frontend):
    """torch.export refuses to return such an object; the export frontend leaves it out
    as the jit frontend does, and the model's own forward is unchanged afterwards."""
    model = ReturnsACache()
    art, notes = _caught(lambda: t2n.compile(model, (X,), frontend=frontend), NonTensorOutputWarning)
    assert art.output_names == ["y"] and any("output cache is a Cache" in n for n in notes), notes
    art.check()
    assert "forward" not in vars(model) and isinstance(model(X)["cache"], Cache)


def test_export_notes_a_dropped_output_too(tmp_path):
    _, notes = _caught(lambda: t2n.export(WithText("hello"), (X,), tmp_path / "m.tar"), NonTensorOutputWarning)
    assert notes and "not in the artifact" in notes[0]


def test_a_none_output_is_dropped_silently():
    _, notes = _caught(lambda: t2n.compile(WithText(None), (X,)), NonTensorOutputWarning)
    assert notes == []


class Trains(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(8, 8)
        self.bn = torch.nn.BatchNorm1d(8)
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(self.bn(self.lin(x)))


@pytest.mark.parametrize("frontend", ["jit", "export"])
def test_a_model_in_training_mode_is_exported_in_eval_mode_with_a_warning(frontend):
    model = Trains().train()
    stats = model.bn.running_mean.clone()
    art, notes = _caught(lambda: t2n.compile(model, (X,), frontend=frontend), TrainingModeWarning)
    assert notes and "training mode" in notes[0] and "eval mode" in notes[0]
    assert model.training and model.drop.training and torch.equal(stats, model.bn.running_mean)
    assert art.check().ok
    with torch.no_grad():
        np.testing.assert_allclose(art.reference_outputs[0], model.eval()(X).numpy(), atol=1e-6)


def test_a_scripted_model_in_training_mode_is_exported_in_eval_mode():
    scripted = torch.jit.script(Trains().train())
    art, notes = _caught(lambda: t2n.compile(scripted, (X,)), TrainingModeWarning)
    assert notes and scripted.training
    assert art.check().ok


def test_a_model_in_eval_mode_warns_nothing():
    _, notes = _caught(lambda: t2n.compile(Trains().eval(), (X,)), TrainingModeWarning)
    assert notes == []


def _flip_tensor_bytes(path: Path, name_part: str = "data/0") -> None:
    """Flip 4 bytes in the middle of a stored member's data (the zip stays readable)."""
    with zipfile.ZipFile(path) as z:
        info = next(i for i in z.infolist() if i.filename.endswith(name_part))
    raw = bytearray(path.read_bytes())
    name_len, extra_len = int.from_bytes(raw[info.header_offset + 26:info.header_offset + 28], "little"), \
        int.from_bytes(raw[info.header_offset + 28:info.header_offset + 30], "little")
    start = info.header_offset + 30 + name_len + extra_len + info.file_size // 2
    raw[start:start + 4] = bytes(b ^ 0xFF for b in raw[start:start + 4])
    path.write_bytes(bytes(raw))


@pytest.fixture
def flipped_pt(tmp_path: Path) -> Path:
    torch.manual_seed(0)
    path = tmp_path / "state.pt"
    torch.save(torch.nn.Linear(64, 32).state_dict(), path)
    _flip_tensor_bytes(path)
    return path


def _crc_refusal(info) -> None:
    assert "CRC" in str(info.value) and "damaged" in str(info.value)


def test_weights_from_a_flipped_pt_is_refused(flipped_pt, tmp_path):
    model = torch.nn.Linear(64, 32)
    with pytest.raises(CorruptTensorFileError) as info:
        t2n.export(model, (torch.rand(1, 64),), tmp_path / "m.tar", weights_from=flipped_pt)
    _crc_refusal(info)
    assert str(flipped_pt) in str(info.value) and not (tmp_path / "m.tar").exists()


def test_tensor_exports_of_a_flipped_pt_are_refused(flipped_pt, tmp_path):
    with pytest.raises(CorruptTensorFileError) as info:
        t2n.export_tensors_from_disk_to_nnef(flipped_pt, tmp_path / "out")
    _crc_refusal(info)
    with pytest.raises(CorruptTensorFileError):
        list(t2n.iter_torch_tensors_from_disk(flipped_pt))


def test_the_tensors_command_refuses_a_flipped_pt(flipped_pt, tmp_path):
    from cli.cli_support import make_runner

    done = make_runner()("tensors", flipped_pt, tmp_path / "out")
    assert done.returncode == 1 and "CRC" in done.stderr, done.stderr


def test_the_export_command_refuses_a_flipped_torchscript_file(tmp_path):
    from cli.cli_support import make_runner

    path = tmp_path / "lin.pt"
    torch.jit.save(torch.jit.script(torch.nn.Linear(64, 32)), str(path))
    _flip_tensor_bytes(path, "data/0")
    done = make_runner()("export", path, "--input-shape", "1,64", "-o", tmp_path / "m.tgz")
    assert done.returncode == 1 and "CRC" in done.stderr, done.stderr
    assert not (tmp_path / "m.tgz").exists()


def test_an_intact_pt_loads_as_before(tmp_path):
    path = tmp_path / "state.pt"
    lin = torch.nn.Linear(64, 32)
    torch.save(lin.state_dict(), path)
    got = dict(t2n.iter_torch_tensors_from_disk(path))
    assert torch.equal(got["weight"], lin.weight.detach())


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("art") / "m"
    t2n.compile(torch.nn.Linear(4, 2), (torch.rand(1, 4),)).save(path)
    return path


def _tampered(saved: Path, tmp_path: Path, edit) -> Path:
    import shutil

    art = Path(shutil.copytree(saved, tmp_path / "m"))
    (art / "graph.nnef").write_text(edit((art / "graph.nnef").read_text()))
    return art


GRAPH_EDITS = {
    "versio": (lambda g: g.replace("version 1.0;", "versio 1.0;"), "version"),
    "version_one": (lambda g: g.replace("version 1.0;", "version one;"), "'version one'"),
    "version_9_9": (lambda g: g.replace("version 1.0;", "version 9.9;"), "9.9"),
    "no_version": (lambda g: g.replace("version 1.0;", ""), "version"),
    "output_never_assigned": (lambda g: re.sub(r"\n(\s*)output_0 =", r"\n\1other =", g), "'output_0'"),
    "input_never_declared": (lambda g: g.replace("input_0 = external", "elsewhere = external"), "'input_0'"),
}


@pytest.mark.parametrize("case", list(GRAPH_EDITS))
def test_inspect_fails_on_a_graph_that_does_not_parse(saved, tmp_path, case):
    from cli.cli_support import make_runner

    edit, named = GRAPH_EDITS[case]
    art = _tampered(saved, tmp_path, edit)
    done = make_runner()("inspect", art)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "graph.nnef" in done.stderr and named in done.stderr, done.stderr


def test_inspect_reads_an_intact_graph(saved):
    from cli.cli_support import make_runner

    done = make_runner()("inspect", saved)
    assert done.returncode == 0, done.stderr


def test_an_artifact_whose_ir_is_edited_after_rendering_is_neither_saved_nor_checked(tmp_path: Path):
    """What is written is what was rendered: an edit of ``artifact.ir`` (here a value
    renamed, which graph.nnef would not show) refuses ``save`` and ``check``, saying to
    make the change a pass of compile; nothing is written."""
    from t2n.errors import StaleArtifactError

    artifact = t2n.compile(torch.nn.Linear(8, 3), (X,), t2n.TractNNEF())
    graph = artifact.ir
    graph.rename(graph.outputs[0], "renamed_after_rendering")
    for act in (lambda: artifact.save(tmp_path / "out"), artifact.check):
        with pytest.raises(StaleArtifactError, match="edited 1 time.*after it was rendered.*a pass of compile"):
            act()
    assert not (tmp_path / "out").exists()
