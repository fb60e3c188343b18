"""``t2n inspect``: what an artifact declares, read without an engine; unreadable
artifacts fail with exit status 1 and a message naming the file and what to do."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import numpy as np

from t2n.serialize.dat import dat_bytes

from .cli_support import GRAPH_NNEF, WEIGHT, Run, write_artifact


def _tar(folder: Path, out: Path, mode: str = "w") -> Path:
    with tarfile.open(out, mode) as tar:
        for f in sorted(folder.iterdir()):
            tar.add(f, arcname=f.name)
    return out


def test_inspect_folder_as_json(t2n_cli: Run, hand_artifact: Path) -> None:
    res = t2n_cli("inspect", hand_artifact, "--json")
    assert res.returncode == 0, res.stderr
    info = json.loads(res.stdout)
    assert info["form"] == "dir"
    assert info["inputs"] == [{"name": "inp", "dtype": "f32", "shape": ["N", 3]}]
    assert [o["name"] for o in info["outputs"]] == ["out", "total"]
    assert info["symbols"] == ["N"] and info["assertions"] == ["N >= 1"]
    assert info["registries"] == ["tract_core"]
    assert info["properties"] == {"made_by": "hand; for tests", "answer": "42"}
    assert info["ops"] == {"add": 1, "sum_reduce": 1}
    assert info["tensors"] == {"count": 1, "bytes": WEIGHT.nbytes,
                               "by_dtype": {"f32": {"count": 1, "bytes": 12, "elements": 3}}}
    assert info["problems"] == []


def test_inspect_tgz_as_text(t2n_cli: Run, hand_artifact: Path, tmp_path: Path) -> None:
    tgz = _tar(hand_artifact, tmp_path / "m.nnef.tgz", "w:gz")
    res = t2n_cli("inspect", tgz)
    assert res.returncode == 0, res.stderr
    assert "(tgz, NNEF 1.0, graph main)" in res.stdout
    assert "inp: f32[N, 3]" in res.stdout and "assertions: N >= 1" in res.stdout
    assert "f32: 1 tensors, 3 elements, 12 B" in res.stdout


def test_inspect_reports_missing_and_unused_tensors(t2n_cli: Run, tmp_path: Path) -> None:
    art = write_artifact(tmp_path / "a", tensors=[("extra.dat", dat_bytes(np.zeros(2, np.int64)))])
    res = t2n_cli("inspect", art, "--json")
    assert res.returncode == 0, res.stderr
    problems = json.loads(res.stdout)["problems"]
    assert "variable 'w': no tensor file layer.w.dat in the artifact" in problems
    assert "tensor file extra.dat is not used by any variable" in problems


def test_not_an_archive_fails_with_1(t2n_cli: Run, tmp_path: Path) -> None:
    bad = tmp_path / "model.nnef.tgz"
    bad.write_bytes(b"this is not an archive" * 40)
    res = t2n_cli("inspect", bad)
    assert res.returncode == 1
    assert "CorruptArchiveError" in res.stderr and str(bad) in res.stderr
    assert "What to do: give an NNEF artifact" in res.stderr
    assert "Traceback" not in res.stderr


def test_folder_without_graph_fails_with_1(t2n_cli: Run, tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "a.dat").write_bytes(dat_bytes(WEIGHT))
    res = t2n_cli("inspect", tmp_path / "x")
    assert res.returncode == 1
    assert "no graph.nnef" in res.stderr and "What to do" in res.stderr


def test_truncated_tensor_in_tar_names_the_member(t2n_cli: Run, hand_artifact: Path, tmp_path: Path) -> None:
    data = dat_bytes(WEIGHT)[:-4]
    tar_path = tmp_path / "m.tar"
    with tarfile.open(tar_path, "w") as tar:
        for name, blob in (("layer.w.dat", data), ("graph.nnef", GRAPH_NNEF.encode())):
            info = tarfile.TarInfo(name)
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    res = t2n_cli("inspect", tar_path)
    assert res.returncode == 1
    assert "CorruptTensorFileError" in res.stderr and "layer.w.dat" in res.stderr
    assert "truncated or padded" in res.stderr


def test_bad_tensor_header_in_folder(t2n_cli: Run, tmp_path: Path) -> None:
    art = write_artifact(tmp_path / "a", tensors=[("layer.w.dat", b"\x00" * 200)])
    res = t2n_cli("inspect", art)
    assert res.returncode == 1
    assert "CorruptTensorFileError" in res.stderr and "layer.w.dat" in res.stderr and "magic" in res.stderr


def test_graph_text_without_graph_block(t2n_cli: Run, tmp_path: Path) -> None:
    art = write_artifact(tmp_path / "a", graph="version 1.0;\nhello world;\n")
    res = t2n_cli("inspect", art)
    assert res.returncode == 1
    assert "0 'graph' blocks found" in res.stderr and "graph.nnef" in res.stderr


def test_truncated_graph_text(t2n_cli: Run, tmp_path: Path) -> None:
    art = write_artifact(tmp_path / "a", graph=GRAPH_NNEF[: GRAPH_NNEF.index("total =")])
    res = t2n_cli("inspect", art)
    assert res.returncode == 1
    assert "ends inside" in res.stderr and "truncated" in res.stderr


def test_missing_path_is_a_usage_error(t2n_cli: Run, tmp_path: Path) -> None:
    res = t2n_cli("inspect", tmp_path / "nothing.tgz")
    assert res.returncode == 2
    assert "nothing.tgz" in res.stderr and "does not exist" in res.stderr


def test_output_shapes_from_tract(t2n_cli: Run, hand_artifact: Path) -> None:
    res = t2n_cli("inspect", hand_artifact, "--output-shapes", "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["outputs"] == [
        {"name": "out", "dtype": "f32", "shape": ["N", 3]},
        {"name": "total", "dtype": "f32", "shape": [1, 1]},
    ]


def test_output_shapes_when_tract_refuses_the_graph(t2n_cli: Run, tmp_path: Path) -> None:
    art = write_artifact(tmp_path / "a", graph=GRAPH_NNEF.replace("add(inp, w)", "no_such_op_xyz(inp, w)"))
    res = t2n_cli("inspect", art, "--output-shapes")
    assert res.returncode == 1
    assert "EngineError: tract could not load" in res.stderr and str(art) in res.stderr
    assert t2n_cli("inspect", art).returncode == 0
