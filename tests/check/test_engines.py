"""Engines run in a child process: a crash becomes a typed error, and the next run works."""

import numpy as np
import pytest

from t2n.check import EngineWorker, run_tract
from t2n.errors import EngineCrashedError, EngineError
from t2n.serialize.dat import write_dat

ABORTING = """version 1.0;
graph main(x) -> (y)
{
    x = external<scalar>(shape = [1, 1, 4]);
    w = variable<scalar>(shape = [1, 1, 3], label = "w");
    y = conv(x, w, 0.0, border = "reflect", padding = [(1, 1)], stride = [1], dilation = [1], groups = 1);
}
"""

FINE = """version 1.0;
graph main(x) -> (y)
{
    x = external<scalar>(shape = [2]);
    y = relu(x);
}
"""


def _model(tmp_path, name, text, weights=None):
    d = tmp_path / name
    d.mkdir()
    (d / "graph.nnef").write_text(text)
    for label, arr in (weights or {}).items():
        write_dat(d / f"{label}.dat", arr)
    return d


def test_abort_in_tract_becomes_a_typed_error_and_the_worker_recovers(tmp_path):
    worker = EngineWorker()
    try:
        bad = _model(tmp_path, "bad", ABORTING, {"w": np.ones((1, 1, 3), np.float32)})
        with pytest.raises(EngineCrashedError, match="died"):
            run_tract(str(bad), [np.ones((1, 1, 4), np.float32)], worker=worker)
        good = _model(tmp_path, "good", FINE)
        out = run_tract(str(good), [np.array([-1.0, 2.0], np.float32)], worker=worker)
        np.testing.assert_array_equal(out.outputs[0], [0.0, 2.0])
    finally:
        worker.close()


def test_refusal_is_an_engine_error_with_tracts_message(tmp_path):
    bad = _model(tmp_path, "bad", FINE.replace("relu(x)", "no_such_op(x)"))
    with pytest.raises(EngineError, match="no_such_op"):
        run_tract(str(bad), [np.zeros(2, np.float32)])


def test_wrong_input_count_is_refused_not_a_segfault(tmp_path):
    good = _model(tmp_path, "good", FINE)
    with pytest.raises(EngineError, match="1 inputs but 0"):
        run_tract(str(good), [])


def test_a_missing_engine_package_says_what_to_install(monkeypatch):
    import importlib.util

    from t2n.check import engines

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "tract" else real(name, *a))
    with pytest.raises(EngineError, match=r"tract are not installed.*t2n\[check\]"):
        engines.run_tract("/nonexistent", [])
