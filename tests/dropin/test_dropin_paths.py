"""export_model_to_nnef: the path suffix and compression_level decide the artifact's form
(directory, .tar, .tgz) as the widely used exporter documents; args may be one tensor;
every bad argument is refused before anything is written."""

from __future__ import annotations

import gzip
import logging
import tarfile
from pathlib import Path

import pytest
import torch
from torch import nn

import t2n
from t2n.errors import InvalidArgumentError, OverwriteRefusedError

X = torch.rand(3, 1)


def perceptron() -> nn.Module:
    return nn.Sequential(nn.Linear(1, 5), nn.ReLU()).eval()


def export(path: object, model: nn.Module | None = None, **kwargs: object) -> Path:
    kwargs.setdefault("log_level", logging.WARNING)
    kwargs.setdefault("input_names", ["inp"])
    kwargs.setdefault("output_names", ["out"])
    return t2n.export_model_to_nnef(model or perceptron(), X, path, t2n.TractNNEF.latest(),  # type: ignore[arg-type]
                                    **kwargs)


def form_of(path: Path) -> str:
    if path.is_dir():
        return "dir"
    with open(path, "rb") as f:
        return "tgz" if f.read(2) == b"\x1f\x8b" else "tar"


def graph_text(path: Path) -> str:
    if path.is_dir():
        return (path / "graph.nnef").read_text()
    with tarfile.open(path) as tar:  # reads .tar and .tgz alike
        member = tar.extractfile("graph.nnef")
        assert member is not None
        return member.read().decode()


@pytest.mark.parametrize("name, level, written, form", [
    ("model.nnef", None, "model.nnef", "dir"),            # None → a directory
    ("model.nnef", 0, "model.nnef.tar", "tar"),           # 0 → .tar beside the base path
    ("model.nnef", 1, "model.nnef.tgz", "tgz"),           # 1..9 → .tgz
    ("model.nnef", 9, "model.nnef.tgz", "tgz"),
    ("model", 0, "model.tar", "tar"),                     # any base path
    ("model.nnef.tgz", 0, "model.nnef.tgz", "tar"),       # the archive named: level 0 = not compressed
    ("model.nnef.tgz", 5, "model.nnef.tgz", "tgz"),
    ("model.nnef.tgz", None, "model.nnef.tgz", "tgz"),    # the suffix says gzip
    ("model.tar.gz", 3, "model.tar.gz", "tgz"),
    ("model.nnef.tar", 0, "model.nnef.tar", "tar"),
    ("model.nnef.tar", None, "model.nnef.tar", "tar"),
])
def test_suffix_and_compression_level_choose_the_form(tmp_path, name, level, written, form):
    model = perceptron()
    got = export(tmp_path / name, model, compression_level=level)
    assert got == tmp_path / written
    assert [p.name for p in tmp_path.iterdir()] == [written]
    assert form_of(got) == form
    assert "graph main(inp) -> (out)" in graph_text(got)
    if form == "tgz":
        with tarfile.open(got, "r:gz") as tar:  # a real gzip stream
            assert tar.getnames()
    # it loads and runs in tract (the drop-in checked it already; check again from the path)
    artifact = t2n.compile(model, X, t2n.TractNNEF.latest(), input_names=["inp"], output_names=["out"])
    artifact.saved_path = got
    assert artifact.check().ok


def test_default_compression_level_is_an_uncompressed_tar(tmp_path):
    got = export(str(tmp_path / "model.nnef"))
    assert got == tmp_path / "model.nnef.tar" and form_of(got) == "tar"


def test_the_documented_example_reads_back_with_tarfile(tmp_path):
    """The other exporter's own example: '.nnef.tgz' with compression_level=0, opened by tarfile."""
    got = export(str(tmp_path / "x.nnef.tgz"), compression_level=0)
    assert str(got) == str(tmp_path / "x.nnef.tgz")
    with tarfile.open(str(got)) as tar:
        assert "graph.nnef" in tar.getnames()


@pytest.mark.parametrize("args", [X, (X,), [X]])
def test_args_may_be_one_tensor(tmp_path, args):
    model = perceptron()
    got = t2n.export_model_to_nnef(model, args, tmp_path / f"m{type(args).__name__}.nnef",
                                   t2n.TractNNEF.latest(), compression_level=None, log_level=logging.WARNING)
    reference = t2n.compile(model, (X,), t2n.TractNNEF.latest())
    assert (got / "graph.nnef").read_text() == reference.graph_nnef


def test_gzip_level_is_honoured(tmp_path):
    model = perceptron()
    fast = export(tmp_path / "fast.nnef", model, compression_level=1)
    best = export(tmp_path / "best.nnef", model, compression_level=9)
    assert gzip.decompress(fast.read_bytes()) == gzip.decompress(best.read_bytes())


# -- bad inputs: typed errors naming the parameter, nothing written ---------------------------

@pytest.mark.parametrize("kwargs, message", [
    ({"file_path_export_name": "model.nnef.tar", "compression_level": 5}, "ends in '.tar'"),
    ({"compression_level": 10}, "compression_level must be"),
    ({"compression_level": -1}, "compression_level must be"),
    ({"compression_level": True}, "compression_level must be"),
    ({"compression_level": "1"}, "compression_level must be"),
    ({"compression_level": 1.0}, "compression_level must be"),
    ({"file_path_export_name": "model.zip", "compression_level": 0}, "suffix '.zip'"),
    ({"custom_extensions": "tract_assert S >= 1"}, "custom_extensions must be a list"),
    ({"input_names": ["graph"]}, "input_names[0] = 'graph'"),
    ({"log_level": "loud"}, "log_level must be"),
    ({"auto_harden_jit": "yes"}, "auto_harden_jit must be True or False"),
])
def test_bad_arguments_are_refused_before_writing(tmp_path, kwargs, message):
    name = kwargs.pop("file_path_export_name", "model.nnef")
    with pytest.raises(InvalidArgumentError) as info:
        export(tmp_path / str(name), **kwargs)
    assert message in str(info.value)
    assert list(tmp_path.iterdir()) == []


def test_tar_with_gzip_level_says_what_to_do(tmp_path):
    with pytest.raises(InvalidArgumentError) as info:
        export(tmp_path / "model.nnef.tar", compression_level=5)
    text = str(info.value)
    assert "file_path_export" in text and "'.tgz'" in text and "compression_level=0" in text


@pytest.mark.parametrize("path", [None, 42, b"model.nnef", ""])
def test_bad_paths(tmp_path, path):
    with pytest.raises(InvalidArgumentError, match="file_path_export"):
        export(path)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("target, message", [
    (None, "inference_target is required"),
    (t2n.TractNNEF, "is the class TractNNEF, not a target: write TractNNEF.latest()"),
    ("tract", "target must be"),
])
def test_bad_inference_targets(tmp_path, target, message):
    with pytest.raises(InvalidArgumentError) as info:
        t2n.export_model_to_nnef(perceptron(), X, tmp_path / "m.nnef", target)
    assert message in str(info.value)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args", [{"x": X}, "x", 3.0])
def test_bad_args(tmp_path, args):
    with pytest.raises(InvalidArgumentError, match="args must be"):
        t2n.export_model_to_nnef(perceptron(), args, tmp_path / "m.nnef", t2n.TractNNEF.latest())
    assert list(tmp_path.iterdir()) == []


def test_a_file_t2n_did_not_write_is_not_replaced(tmp_path):
    mine = tmp_path / "model.nnef.tar"
    mine.write_text("my notes")
    with pytest.raises(OverwriteRefusedError):
        export(tmp_path / "model.nnef", compression_level=0)
    assert mine.read_text() == "my notes"
    assert [p.name for p in tmp_path.iterdir()] == ["model.nnef.tar"]


def test_options_of_other_helpers_are_passed_on_only_when_changed(tmp_path):
    """Defaults are not forwarded (so compile need not know them); a changed value is."""
    export(tmp_path / "ok.nnef", nnef_variable_naming_scheme="natural_verbose", check_io_names_qte_match=True,
           allow_same_io_names=False, debug_bundle_path=None)
    assert (tmp_path / "ok.nnef.tar").exists()
    import inspect

    known = inspect.signature(t2n.compile).parameters
    if "nnef_variable_naming_scheme" not in known:
        with pytest.raises(InvalidArgumentError, match="nnef_variable_naming_scheme"):
            export(tmp_path / "numeric.nnef", nnef_variable_naming_scheme="numeric")
        assert not (tmp_path / "numeric.nnef.tar").exists()
