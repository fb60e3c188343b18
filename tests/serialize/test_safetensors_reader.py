import json
import struct

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from t2n.errors import CorruptTensorFileError
from t2n.ir import DType
from t2n.serialize.safetensors_reader import (
    open_safetensors,
    open_weights,
    read_safetensors_header,
    safetensors_files,
)

TENSORS = {
    "f32": torch.randn(3, 5),
    "f16": torch.randn(7).half(),
    "bf16": torch.randn(2, 3, 4).to(torch.bfloat16),
    "f64": torch.randn(2, dtype=torch.float64),
    "i64": torch.arange(12).reshape(3, 4),
    "i8": torch.tensor([-3, 4], dtype=torch.int8),
    "u8": torch.tensor([0, 255], dtype=torch.uint8),
    "bool": torch.tensor([True, False, True]),
    "scalar": torch.tensor(2.5),
    "empty": torch.zeros(0, 3),
}


def _expected(t):
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


def test_reads_every_dtype_lazily_and_in_chunks(tmp_path):
    path = tmp_path / "m.safetensors"
    save_file(TENSORS, path)
    lazy = open_safetensors(path)
    assert set(lazy) == set(TENSORS)
    assert lazy["bf16"].dtype is DType.BF16 and lazy["bf16"].shape == (2, 3, 4)
    for name, t in TENSORS.items():
        np.testing.assert_array_equal(lazy[name].raw(), _expected(t))
        pieces = list(lazy[name].iter_chunks(6))
        assert all(p.nbytes <= 8 for p in pieces)  # 6 bytes rounded to whole elements
        flat = np.concatenate(pieces) if pieces else np.zeros(0, _expected(t).dtype)
        np.testing.assert_array_equal(flat, _expected(t).reshape(-1))


def _write_raw(path, header, data=b"", pad_header=True):
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)
    return path


@pytest.mark.parametrize("header, data, message", [
    ({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 4, "outside"),
    ({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8, "needs 12 bytes"),
    ({"w": {"dtype": "F6_E2M3", "shape": [2], "data_offsets": [0, 2]}}, b"\0" * 2, "cannot export"),
    ({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}, b"\0" * 4, "malformed"),
    ({"w": {"shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4, "no dtype"),
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
      "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, b"\0" * 12, "overlap"),
    ({"__metadata__": 3}, b"", "__metadata__"),
])
def test_bad_headers_are_rejected(tmp_path, header, data, message):
    with pytest.raises(CorruptTensorFileError, match=message):
        read_safetensors_header(_write_raw(tmp_path / "bad.safetensors", header, data))


def test_bad_framing_is_rejected(tmp_path):
    p = tmp_path / "x.safetensors"
    p.write_bytes(b"\x01\x02")
    with pytest.raises(CorruptTensorFileError, match="shorter than"):
        read_safetensors_header(p)
    p.write_bytes(struct.pack("<Q", 1 << 40) + b"{}")
    with pytest.raises(CorruptTensorFileError, match="does not fit"):
        read_safetensors_header(p)
    p.write_bytes(struct.pack("<Q", 5) + b"{nope")
    with pytest.raises(CorruptTensorFileError, match="not JSON"):
        read_safetensors_header(p)


def test_truncated_after_opening_is_reported_when_read(tmp_path):
    p = tmp_path / "m.safetensors"
    save_file({"w": torch.randn(1000)}, p)
    lazy = open_safetensors(p)
    p.write_bytes(p.read_bytes()[:-100])
    with pytest.raises(CorruptTensorFileError, match="truncated"):
        list(lazy["w"].iter_chunks())


def test_sharded_checkpoints(tmp_path):
    save_file({"a": torch.ones(2)}, tmp_path / "model-00001-of-00002.safetensors")
    save_file({"b": torch.zeros(3)}, tmp_path / "model-00002-of-00002.safetensors")
    index = {"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors",
                                            "b": "model-00002-of-00002.safetensors"}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    assert len(safetensors_files(tmp_path)) == 2
    for source in (tmp_path, tmp_path / "model.safetensors.index.json"):
        w = open_weights(source)
        assert sorted(w) == ["a", "b"]
        np.testing.assert_array_equal(w["b"].raw(), np.zeros(3, np.float32))
    save_file({"a": torch.ones(1)}, tmp_path / "dup.safetensors")
    (tmp_path / "model.safetensors.index.json").unlink()
    with pytest.raises(CorruptTensorFileError, match="two shards"):
        open_weights(tmp_path)
