"""Inputs read from disk: safetensors headers, tar artifacts, ``.pt``/``.bin`` checkpoints
and 8-bit float weights.

Each bad input gets a typed error naming the file and what is wrong in it (never
torch's advice to load with ``weights_only=False``), and nothing is written. float8
weights are exported as f16 (f32 for e8m0), which holds each of their values exactly;
computing in float8 is refused with the op.
"""

from __future__ import annotations

import io
import json
import logging
import tarfile

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

import t2n
from t2n.errors import (
    CorruptArchiveError,
    CorruptTensorFileError,
    InvalidArgumentError,
    UnsupportedOpsError,
)
from t2n.ir import DType
from t2n.ir.float8 import FLOAT8_FORMATS, float8_table
from t2n.serialize.archive import read_artifact
from t2n.serialize.dat import read_dat
from t2n.serialize.safetensors_reader import open_safetensors
from t2n.serialize.torch_io import (
    export_tensors_from_disk_to_nnef,
    export_tensors_to_nnef,
    load_torch_checkpoint,
)


def _safetensors(path, header, data=b""):
    raw = header.encode() if isinstance(header, str) else json.dumps(header).encode()
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + data)
    return path


F32_2 = '{"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}'

# -- safetensors headers -----------------------------------------------------------------

BAD_SAFETENSORS = [
    ("duplicate tensor", '{"w": ' + F32_2 + ', "w": ' + F32_2 + "}", b"\0" * 8, "'w' twice"),
    ("duplicate field", '{"w": {"dtype": "F32", "dtype": "F16", "shape": [2], "data_offsets": [0, 8]}}',
     b"\0" * 8, "'dtype' twice"),
    ("duplicate metadata key", '{"__metadata__": {"a": "1", "a": "2"}, "w": ' + F32_2 + "}", b"\0" * 8,
     "'a' twice"),
    ("header longer than the file", None, b"", "does not fit"),
    ("offsets past the end", '{"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}', b"\0" * 8,
     "outside"),
    ("offsets disagree with shape", '{"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}',
     b"\0" * 8, "needs 12 bytes"),
    ("negative offset", '{"w": {"dtype": "F32", "shape": [2], "data_offsets": [-8, 0]}}', b"\0" * 8,
     "outside"),
    ("overlapping tensors", '{"a": ' + F32_2 + ', "b": ' + F32_2 + "}", b"\0" * 8, "overlap"),
    ("header not JSON", "{not json", b"", "not JSON"),
    ("header a list", "[1, 2]", b"", "not a JSON object"),
    ("dtype t2n cannot export", '{"w": {"dtype": "F6_E2M3", "shape": [2], "data_offsets": [0, 2]}}',
     b"\0\0", "cannot export"),
]


@pytest.mark.parametrize("case, header, data, message", BAD_SAFETENSORS, ids=[c[0] for c in BAD_SAFETENSORS])
def test_bad_safetensors_header_is_refused_and_nothing_written(tmp_path, case, header, data, message):
    path = tmp_path / "m.safetensors"
    if header is None:
        path.write_bytes((1000).to_bytes(8, "little") + b"{}")
    else:
        _safetensors(path, header, data)
    out = tmp_path / "out"
    with pytest.raises(CorruptTensorFileError, match=message) as info:
        export_tensors_from_disk_to_nnef(path, out)
    assert str(path) in str(info.value)
    assert not out.exists()


@pytest.mark.parametrize("content", [b"", b"\x01\x02\x03"], ids=["empty", "7 bytes short"])
def test_empty_or_short_safetensors_file(tmp_path, content):
    path = tmp_path / "m.safetensors"
    path.write_bytes(content)
    with pytest.raises(CorruptTensorFileError, match="shorter than the 8-byte header") as info:
        open_safetensors(path)
    assert str(path) in str(info.value)
    assert ("(the file is empty)" in str(info.value)) == (content == b"")


def test_safetensors_path_that_is_a_folder(tmp_path):
    folder = tmp_path / "m.safetensors"
    folder.mkdir()
    with pytest.raises(CorruptTensorFileError, match="is a folder") as info:
        open_safetensors(folder)
    assert str(folder) in str(info.value)
    with pytest.raises(InvalidArgumentError, match="holds no .safetensors file"):
        export_tensors_from_disk_to_nnef(folder, tmp_path / "out")  # a folder is a sharded checkpoint
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("weight_map, message", [
    ('{"a": "s1.safetensors", "a": "s2.safetensors"}', "'a' twice"),
    ('{"a": "s1.safetensors", "b": "gone.safetensors"}', "'gone.safetensors'"),
], ids=["duplicate tensor in the index", "shard missing"])
def test_bad_sharded_index(tmp_path, weight_map, message):
    save_file({"a": torch.ones(2)}, tmp_path / "s1.safetensors")
    save_file({"a": torch.zeros(2)}, tmp_path / "s2.safetensors")
    index = tmp_path / "m.safetensors.index.json"
    index.write_text('{"metadata": {}, "weight_map": ' + weight_map + "}")
    with pytest.raises(CorruptTensorFileError, match=message) as info:
        export_tensors_from_disk_to_nnef(index, tmp_path / "out")
    assert str(index) in str(info.value)
    assert not (tmp_path / "out").exists()


# -- tar artifacts ------------------------------------------------------------------------


def _tar(path, names, mode="w"):
    with tarfile.open(path, mode) as tar:
        for i, name in enumerate(names):
            data = f"version 1.0; # {i}\n".encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


@pytest.mark.parametrize("suffix, mode, names", [
    (".tar", "w", ["graph.nnef", "w.dat", "graph.nnef"]),
    (".tgz", "w:gz", ["w.dat", "graph.nnef", "w.dat"]),
    (".tar", "w", ["graph.nnef", "./graph.nnef"]),
], ids=["tar", "tgz", "same name spelled with ./"])
def test_duplicate_tar_member_is_refused(tmp_path, suffix, mode, names):
    path = _tar(tmp_path / f"model{suffix}", names, mode)
    with pytest.raises(CorruptArchiveError, match="appears twice") as info:
        read_artifact(path)
    dup = names[-1]
    assert repr(dup) in str(info.value) and str(path) in str(info.value)


# -- .pt / .bin checkpoints -----------------------------------------------------------------


class Custom:
    """A class torch.load(weights_only=True) refuses to rebuild."""


def _zip_pt(path):
    torch.save({"w": torch.randn(8, 4)}, path)
    return path


def _truncated_zip(path):
    data = _zip_pt(path).read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _truncated_legacy(path):
    torch.save({"w": torch.randn(8, 4)}, path, _use_new_zipfile_serialization=False)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


BAD_PT = [
    ("truncated zip", "m.pt", _truncated_zip, "not a PyTorch checkpoint .* or truncated"),
    ("truncated legacy pickle", "m.bin", _truncated_legacy, "not a PyTorch checkpoint .* or truncated"),
    ("random bytes", "m.pt", lambda p: p.write_bytes(np.random.default_rng(0).bytes(1000)),
     "not a PyTorch checkpoint .* or truncated"),
    ("text", "m.bin", lambda p: p.write_text("hello world"), "not a PyTorch checkpoint .* or truncated"),
    ("empty", "m.pt", lambda p: p.write_bytes(b""), "the file is empty"),
    ("a custom class", "m.pt", lambda p: torch.save({"w": Custom()}, p), "class .*Custom"),
    ("no tensors", "m.pt", lambda p: torch.save({"epoch": 3, "name": "x"}, p), "holds no tensor"),
    ("a folder", "m.pt", lambda p: p.mkdir(), "is a folder"),
]


@pytest.mark.parametrize("case, name, make, message", BAD_PT, ids=[c[0] for c in BAD_PT])
def test_bad_torch_checkpoint(tmp_path, case, name, make, message):
    path = tmp_path / name
    make(path)
    out = tmp_path / "out"
    with pytest.raises(CorruptTensorFileError, match=message) as info:
        export_tensors_from_disk_to_nnef(path, out)
    text = str(info.value)
    assert str(path) in text
    assert "weights_only" not in text  # never the advice to run the file's code
    assert not out.exists()
    if case not in ("empty", "a folder", "no tensors"):
        assert info.value.__cause__ is not None  # torch's own error, kept for who needs it


def test_bad_checkpoint_as_weights_from_is_refused_before_tracing(tmp_path):
    path = tmp_path / "m.pt"
    _truncated_zip(path)
    with pytest.raises(CorruptTensorFileError, match="or truncated"):
        t2n.compile(torch.nn.Linear(4, 8), (torch.randn(1, 4),), weights_from=path)


@pytest.mark.parametrize("where", ["weights_from", "export_tensors_to_nnef"])
def test_non_tensor_value_in_a_mapping_is_named(tmp_path, where):
    tensors = {"weight": torch.randn(8, 4), "bias": "zeros"}
    with pytest.raises(InvalidArgumentError, match=r"\['bias'\] is a str, not a tensor"):
        if where == "weights_from":
            t2n.compile(torch.nn.Linear(4, 8), (torch.randn(1, 4),), weights_from=tensors)
        else:
            export_tensors_to_nnef(tensors, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_checkpoint_with_tensors_and_other_values_keeps_the_tensors(tmp_path):
    path = tmp_path / "m.pt"
    torch.save({"epoch": 3, "model": {"w": torch.ones(2)}}, path)
    tensors, _ = load_torch_checkpoint(path)
    assert list(tensors) == ["model.w"]


# -- float8 ---------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", sorted(FLOAT8_FORMATS))
def test_float8_table_is_exact_for_all_256_codes(fmt):
    """Our table (built from the bit layout) against PyTorch's conversion, every code,
    NaN and infinities included, and back: each value converts to its own code."""
    assert hasattr(torch, fmt), f"the pinned torch has no {fmt}: the table cannot be checked"
    f = FLOAT8_FORMATS[fmt]
    codes = torch.arange(256, dtype=torch.uint8).view(getattr(torch, fmt))
    ref = codes.to(torch.float64).numpy()
    ours = float8_table(f)
    assert ours.dtype == f.exported_as.numpy
    nan = np.isnan(ref)
    np.testing.assert_array_equal(np.isnan(ours), nan)
    np.testing.assert_array_equal(ours[~nan].astype(np.float64), ref[~nan])
    np.testing.assert_array_equal(np.signbit(ours[~nan]), np.signbit(ref[~nan]))  # -0.0 stays -0.0
    back = torch.from_numpy(ours.copy()).to(getattr(torch, fmt)).view(torch.uint8).numpy()
    np.testing.assert_array_equal(back[~nan], np.arange(256)[~nan])
    assert np.isinf(ours).sum() == (2 if f.special == "ieee" else 0)


class Float8Model(torch.nn.Module):
    """float8 parameter, buffer and constant, each cast to the input's dtype before use."""

    def __init__(self, constant: bool = True) -> None:
        super().__init__()
        self.constant = constant
        g = torch.Generator().manual_seed(0)
        self.w = torch.nn.Parameter(torch.randn(16, 8, generator=g).to(torch.float8_e4m3fn),
                                    requires_grad=False)
        self.register_buffer("b", (torch.randn(8, generator=g) * 1e3).to(torch.float8_e5m2))
        self.c = torch.tensor([1.0, -2.5, 448.0, 2.0**-9, 0.0, 3.0, -0.75, 96.0]).to(torch.float8_e4m3fn)

    def forward(self, x):
        y = x @ self.w.to(x.dtype) + self.b.to(x.dtype) + self.w.t().t()[0].to(x.dtype)
        return y * self.c.to(x.dtype) if self.constant else y


def test_float8_model_runs_in_tract_with_the_exact_values(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="t2n"):
        art = t2n.compile(Float8Model(), (torch.randn(3, 16),))
    said = caplog.text
    assert "tensor 'w' float8_e4m3fn" in said and "exported as f16" in said
    assert "tensor 'b' float8_e5m2" in said
    art.save(tmp_path / "m.tgz")
    art.check()


@pytest.mark.parametrize("forward, op", [
    (lambda m, x: (m.w @ m.w.t()).to(x.dtype).sum() + x, "aten::matmul"),
    (lambda m, x: x.to(torch.float8_e5m2).to(x.dtype), "aten::to"),
], ids=["matmul in float8", "cast to float8"])
def test_computing_in_float8_is_refused_with_the_op(tmp_path, forward, op):
    class M(Float8Model):
        def forward(self, x):
            return forward(self, x)

    with pytest.raises(UnsupportedOpsError, match="cannot be computed in NNEF or tract") as info:
        t2n.compile(M(), (torch.randn(3, 16),))
    assert op in info.value.ops
    assert "test_disk_inputs.py" in str(info.value)  # the source line


def _f8_state():
    g = torch.Generator().manual_seed(1)
    return {
        "a.e4m3": (torch.randn(64, 3, generator=g) * 50).to(torch.float8_e4m3fn),
        "b.e5m2": (torch.randn(40, generator=g) * 1e4).to(torch.float8_e5m2),
        "c.f32": torch.randn(5, generator=g),
    }


def _assert_exact_f16(written, state):
    for name, t in state.items():
        got = read_dat(written[name].path)
        if t.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
            assert written[name].dtype is DType.F16
            np.testing.assert_array_equal(got, t.to(torch.float16).numpy())
        else:
            np.testing.assert_array_equal(got, t.numpy())


@pytest.mark.parametrize("source", ["state dict", "safetensors file", ".pt file"])
def test_float8_tensors_are_exported_as_exact_f16(tmp_path, caplog, source):
    state = _f8_state()
    out = tmp_path / "out"
    with caplog.at_level(logging.WARNING, logger="t2n"):
        if source == "state dict":
            written = export_tensors_to_nnef(state, out)
        elif source == "safetensors file":
            save_file(state, tmp_path / "m.safetensors")
            written = export_tensors_from_disk_to_nnef(tmp_path / "m.safetensors", out)
        else:
            torch.save(state, tmp_path / "m.pt")
            written = export_tensors_from_disk_to_nnef(tmp_path / "m.pt", out)
    _assert_exact_f16(written, state)
    assert "'a.e4m3'" in caplog.text and "'b.e5m2'" in caplog.text and "f16" in caplog.text
    assert "'c.f32'" not in caplog.text


def test_float8_checkpoint_as_weights_from_of_a_meta_model(tmp_path):
    model = Float8Model(constant=False)
    save_file({"w": model.w, "b": model.b}, tmp_path / "m.safetensors")
    with torch.device("meta"):
        meta = Float8Model(constant=False)
    art = t2n.compile(meta, (torch.randn(3, 16),), weights_from=tmp_path / "m.safetensors")
    art.save(tmp_path / "m")
    expected = model(x := torch.randn(3, 16))
    art.check(inputs=[x.numpy()], expected=[expected.numpy()])
