"""What the reader refuses, and how: operations it does not know (all listed at once),
variables whose tensor is missing or of another shape, truncated or corrupt tensors
(typed errors naming the file, never data read as garbage), text that is not NNEF
(naming the line); and what it keeps lazy (tensor payloads, a .tgz's temporary folder)."""

from __future__ import annotations

import gc
import tarfile
from pathlib import Path

import numpy as np
import pytest

import t2n
from t2n.errors import CorruptTensorFileError, NNEFReadError, NNEFSyntaxError
from t2n.serialize.dat import dat_bytes

GRAPH = """version 1.0;
extension tract_registry tract_core;
extension tract_symbol N;

graph main(x) -> (y)
{
    x = external<scalar>(shape = [N, 3]);
    w = variable<scalar>(shape = [3], label = "w");
    y = add(x, w);
}
"""


def _artifact(root: Path, graph: str = GRAPH, tensors: dict[str, bytes] | None = None) -> Path:
    root.mkdir()
    (root / "graph.nnef").write_text(graph)
    for name, data in (tensors if tensors is not None else {"w.dat": dat_bytes(np.ones(3, np.float32))}).items():
        (root / name).write_bytes(data)
    return root


def test_unknown_operations_are_listed_at_once(tmp_path: Path) -> None:
    graph = GRAPH.replace("y = add(x, w);", "a = frobnicate(x);\n    b = twiddle(a, w);\n    y = frobnicate(b);")
    with pytest.raises(NNEFReadError) as err:
        t2n.read(_artifact(tmp_path / "a", graph))
    assert err.value.problems == ["frobnicate (2 calls)", "twiddle (1 call)"]


def test_missing_tensor_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(NNEFReadError, match=r"variable 'w': the artifact has no tensor file w\.dat"):
        t2n.read(_artifact(tmp_path / "a", tensors={}))


def test_a_tensor_of_another_shape_is_refused(tmp_path: Path) -> None:
    with pytest.raises(NNEFReadError, match=r"declared \[3\] but w\.dat holds \[4\]"):
        t2n.read(_artifact(tmp_path / "a", tensors={"w.dat": dat_bytes(np.ones(4, np.float32))}))


@pytest.mark.parametrize("form", ["dir", "tar", "tgz"])
def test_truncated_tensors_are_refused_in_every_form(form: str, tmp_path: Path) -> None:
    folder = _artifact(tmp_path / "a", tensors={"w.dat": dat_bytes(np.ones(3, np.float32))[:-2]})
    path = folder
    if form != "dir":
        path = tmp_path / f"a.{form}"
        with tarfile.open(path, "w:gz" if form == "tgz" else "w") as tar:
            for f in folder.iterdir():
                tar.add(f, arcname=f.name)
    with pytest.raises(CorruptTensorFileError, match=r"w\.dat: truncated: 10 of 12 payload bytes"):
        t2n.read(path)


def test_a_corrupt_header_is_refused(tmp_path: Path) -> None:
    bad = bytearray(dat_bytes(np.ones(3, np.float32)))
    bad[0] = 0
    with pytest.raises(CorruptTensorFileError, match="wrong magic"):
        t2n.read(_artifact(tmp_path / "a", tensors={"w.dat": bytes(bad)}))


def test_text_that_is_not_nnef_names_the_line(tmp_path: Path) -> None:
    with pytest.raises(NNEFSyntaxError, match=r"graph\.nnef:10: expected ';', found '}'"):
        t2n.read(_artifact(tmp_path / "a", GRAPH.replace("y = add(x, w);", "y = add(x, w)")))


def test_types_that_do_not_fit_name_the_statement(tmp_path: Path) -> None:
    graph = GRAPH.replace("y = add(x, w);", "y = matmul(x, w);")
    with pytest.raises(NNEFReadError, match=r"`y = matmul\(x, w\);`: matmul"):
        t2n.read(_artifact(tmp_path / "a", graph))


def test_payloads_are_read_only_when_values_are(tmp_path: Path) -> None:
    """A valid header over garbage of the right length: reading the graph touches only
    the header; the values are what the bytes hold."""
    data = bytearray(dat_bytes(np.zeros(3, np.float32)))
    data[128:] = np.array([1.5, 2.5, 3.5], np.float32).tobytes()
    model = t2n.read(_artifact(tmp_path / "a", tensors={"w.dat": bytes(data)}))
    (op,) = [op for op in model.graph.ops() if op.kind == "nnef_variable"]
    assert isinstance(op.attrs["data"].raw(), np.memmap) or op.attrs["data"].raw().base is not None
    assert op.attrs["data"].values().tolist() == [1.5, 2.5, 3.5]


def test_a_tgz_is_unpacked_once_and_cleaned_up(tmp_path: Path) -> None:
    folder = _artifact(tmp_path / "a")
    with tarfile.open(tmp_path / "a.tgz", "w:gz") as tar:
        for f in folder.iterdir():
            tar.add(f, arcname=f.name)
    model = t2n.read(tmp_path / "a.tgz")
    (op,) = [op for op in model.graph.ops() if op.kind == "nnef_variable"]
    unpacked = Path(op.attrs["data"].region.path)
    assert unpacked.exists() and not unpacked.is_relative_to(tmp_path)
    assert op.attrs["data"].values().tolist() == [1.0, 1.0, 1.0]
    del model, op
    gc.collect()
    assert not unpacked.exists()


def test_quantized_inputs_are_refused_by_name(tmp_path: Path) -> None:
    folder = _artifact(tmp_path / "a")
    (folder / "graph.quant").write_text('"x": zero_point_linear_quantize(zero_point = 0, scale = 0.5, bits = 8, '
                                        "signed = true, symmetric = false);\n")
    with pytest.raises(NNEFReadError, match="graph.quant quantizes the input 'x'"):
        t2n.read(folder)
