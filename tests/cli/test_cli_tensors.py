"""``t2n tensors SRC DEST``: a checkpoint's tensors as .dat files, all or none."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from t2n.serialize.dat import read_dat

from .cli_support import Run

TENSORS = {
    "enc.w": np.arange(12, dtype=np.float32).reshape(3, 4),
    "enc.b": np.ones(4, np.float32),
    "dec/w": np.full((2, 2), 3, np.int64),
}


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    save_file(TENSORS, str(tmp_path / "ck.safetensors"))
    return tmp_path / "ck.safetensors"


def test_filter_writes_the_matching_tensors(t2n_cli: Run, checkpoint: Path, tmp_path: Path) -> None:
    res = t2n_cli("tensors", checkpoint, tmp_path / "out", "--filter", r"^enc\.", "--json")
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)["tensors"]
    assert sorted(r["name"] for r in rows) == ["enc.b", "enc.w"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["enc.b.dat", "enc.w.dat"]
    np.testing.assert_array_equal(read_dat(tmp_path / "out" / "enc.w.dat"), TENSORS["enc.w"])
    res = t2n_cli("tensors", checkpoint, "--list")
    assert res.returncode == 0, res.stderr
    assert "dec/w: int64[2, 2]" in res.stdout


def test_filter_matching_nothing_writes_nothing(t2n_cli: Run, checkpoint: Path, tmp_path: Path) -> None:
    res = t2n_cli("tensors", checkpoint, tmp_path / "out", "--filter", "^decoder")
    assert res.returncode == 1
    assert "--filter '^decoder' matches none of the 3 tensors" in res.stderr and "--list" in res.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("args", "message"), [
    (("--filter", "(unclosed"), "'(unclosed' is not a regular expression"),
    ((), "give DEST"),
])
def test_usage_errors(t2n_cli: Run, checkpoint: Path, args: tuple[str, ...], message: str, tmp_path: Path) -> None:
    dest = () if not args else (tmp_path / "out",)
    res = t2n_cli("tensors", checkpoint, *dest, *args)
    assert res.returncode == 2
    assert message in res.stderr


def test_unreadable_checkpoint(t2n_cli: Run, tmp_path: Path) -> None:
    (tmp_path / "ck.pt").write_bytes(b"\x00garbage" * 10)
    res = t2n_cli("tensors", tmp_path / "ck.pt", tmp_path / "out")
    assert res.returncode == 1
    assert "CorruptTensorFileError" in res.stderr and "ck.pt" in res.stderr and "torch.save" in res.stderr
    assert not (tmp_path / "out").exists()
