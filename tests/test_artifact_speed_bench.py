"""The artifact speed benchmark (benchmarks/artifact_speed.py) runs without the optional
``onnx`` package and without the other exporter's environment, says so, and names the
models a peer could not export (with the peer's error) or whose output is not PyTorch's."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import numpy as np

from benchmarks import artifact_speed, peer, speed_engines


def _row(text: str, start: str) -> list[str]:
    line = next(line for line in text.splitlines() if line.startswith(f"| {start}"))
    return [c.strip() for c in line.strip("|").split("|")]


def _fake_peer(tmp_path: Path, script: str) -> Path:
    """A peer environment whose ``python`` is ``script`` (a shell script)."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text("#!/bin/sh\n" + script)
    python.chmod(0o755)
    return venv


def test_without_onnx_and_peer_their_columns_say_n_a_and_why(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx raises ImportError
    monkeypatch.setattr(artifact_speed, "DOC", tmp_path / "speed.md")
    text = artifact_speed.main(["--only", "cumsum", "--runs", "1", "--min-seconds", "0", "--peer-venv", str(tmp_path / "none"), "--write"])
    cells = _row(text, "cumsum")
    assert float(cells[1]) > 0 and float(cells[2]) > 0, cells
    assert cells[3:] == ["n/a"] * 6, cells
    assert "onnx" in text and "pip install 't2n[bench]'" in text and "skipped" in text
    assert "torch_to_nnef columns n/a" in text and str(tmp_path / "none" / "bin" / "python") in text
    assert "pip install torch_to_nnef" in text
    assert (tmp_path / "speed.md").read_text().endswith(text)


def test_a_peer_that_refuses_the_model_is_named_with_its_error_not_a_crash(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "onnx", None)
    venv = _fake_peer(tmp_path, "echo 'Traceback ...' >&2\necho 'PEER-ERROR: T2NErrorNotImplemented: aten::cumsum' >&2\n"
                                "echo 'more noise' >&2\nexit 1\n")
    text = artifact_speed.main(["--only", "cumsum", "--runs", "1", "--min-seconds", "0", "--peer-venv", str(venv)])
    cells = _row(text, "cumsum")
    assert cells[5:7] == ["failed", "failed"] and cells[-1] == "n/a", cells
    assert "* cumsum over 1000 steps: torch_to_nnef failed (T2NErrorNotImplemented: aten::cumsum)" in text


def test_a_peer_that_writes_nothing_is_named_too(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "onnx", None)
    venv = _fake_peer(tmp_path, "exit 0\n")
    text = artifact_speed.main(["--only", "cumsum", "--runs", "1", "--min-seconds", "0", "--peer-venv", str(venv)])
    assert _row(text, "cumsum")[5:7] == ["failed", "failed"]
    assert "torch_to_nnef failed (wrote no model.nnef* in" in text


def test_the_peer_failure_line_is_its_report_else_the_traceback_last_line():
    assert peer.failure("Traceback\n  File x\nValueError: bad\n") == "ValueError: bad"
    assert peer.failure(f"noise\n{peer.ERROR_MARK}KeyError: 'x'\nlater noise\n") == "KeyError: 'x'"
    assert peer.failure("") == "no message"
    assert len(peer.failure("E" * 1000)) == 200


def test_failed_exports_and_wrong_outputs_are_named_with_the_reason():
    rows = [{"model": "m", "t2n": {"load": 0.001, "run": 0.002}, "onnx_error": "UnsupportedOperatorError: aten::diff",
             "peer_error": "T2NErrorRuntime: aten::diff", "mismatch": ["t2n: max abs error 0.5 against PyTorch"]}]
    text = artifact_speed.table(rows)
    assert "| m | 1.0 | 2.0 | failed | failed | failed | failed | n/a | n/a |" in text
    assert "* m: torch.onnx failed (UnsupportedOperatorError: aten::diff)" in text
    assert "* m: torch_to_nnef failed (T2NErrorRuntime: aten::diff)" in text
    assert "* m: output differs (t2n: max abs error 0.5 against PyTorch)" in text


def test_best_peer_is_the_faster_of_onnx_and_the_nnef_exporter():
    rows = [{"model": "a", "t2n": {"load": 0.001, "run": 0.003}, "onnx": {"load": 0.001, "run": 0.002},
             "peer": {"load": 0.001, "run": 0.004}},
            {"model": "b", "t2n": {"load": 0.001, "run": 0.003}, "onnx": {"load": 0.001, "run": 0.006},
             "peer": {"load": 0.001, "run": 0.002}},
            {"model": "c", "t2n": {"load": 0.001, "run": 0.003}, "peer": {"load": 0.001, "run": 0.002}}]
    text = artifact_speed.table(rows)
    assert _row(text, "a")[-2:] == ["1.50", "1.50"]
    assert _row(text, "b")[-2:] == ["0.50", "1.50"]
    assert _row(text, "c")[3:5] == ["n/a", "n/a"] and _row(text, "c")[-2:] == ["n/a", "1.50"]


def test_an_output_unlike_pytorch_is_caught():
    want = np.ones((2, 3), np.float32)
    assert speed_engines.mismatch(want + 1e-6, want) is None
    assert "max abs error 0.1" in (speed_engines.mismatch(want + 0.1, want) or "")
    assert "output shape [3, 2]" in (speed_engines.mismatch(want.T, want) or "")


def test_write_replaces_the_table_and_keeps_the_notes_after_the_keep_line(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "onnx", None)
    doc = tmp_path / "speed.md"
    doc.write_text(f"# old table\n| stale | row |\n\n{speed_engines.KEEP}\n\n## Before\n\nhand-written\n")
    monkeypatch.setattr(artifact_speed, "DOC", doc)
    text = artifact_speed.main(["--only", "cumsum", "--runs", "1", "--min-seconds", "0", "--peer-venv", str(tmp_path / "none"), "--write"])
    written = doc.read_text()
    assert "stale" not in written and text in written
    assert written.endswith(f"{speed_engines.KEEP}\n\n## Before\n\nhand-written\n")


def test_results_md_section_shows_each_ratio_and_links_the_full_file(tmp_path):
    doc = tmp_path / "RESULTS_ARTIFACT_SPEED.md"
    assert "no table yet" in "\n".join(artifact_speed.results_section(doc))
    rows = [{"model": "gru", "t2n": {"load": 0.007, "run": 0.0017}, "onnx": {"load": 0.011, "run": 0.0016},
             "peer": {"load": 0.011, "run": 0.0020}}]
    doc.write_text(artifact_speed.table(rows) + "| lstm | 1 | 2 | 3 | 4 | 0.98 |\n"
                   f"\n{speed_engines.KEEP}\n| old | 1 | 2 | 3 | 4 | 9.99 |\n")
    section = "\n".join(artifact_speed.results_section(doc))
    assert "| gru | 1.06 | 1.06 |" in section and "| lstm | 0.98 | n/a |" in section and "9.99" not in section
    assert "[RESULTS_ARTIFACT_SPEED.md](RESULTS_ARTIFACT_SPEED.md)" in section


def test_the_peer_side_modules_do_not_import_t2n():
    """The other exporter's environment runs them without t2n."""
    root = Path(artifact_speed.__file__).parent
    for name in ("speed_models.py", "peer_export.py"):
        tree = ast.parse((root / name).read_text())
        imported = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        imported += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        assert not [m for m in imported if m.split(".")[0] == "t2n"], (name, imported)


class _Counting:
    """A stand-in runnable that counts its runs."""

    def __init__(self) -> None:
        self.calls = 0

    def run(self, inputs):
        self.calls += 1
        return [type("T", (), {"to_numpy": lambda self: np.zeros(1)})()]


def test_fast_models_run_more_rounds_alternating_up_to_a_cap():
    a, b = _Counting(), _Counting()
    medians, first = speed_engines.time_interleaved({"t2n": a, "peer": b}, [], runs=3)
    assert a.calls == b.calls == 4 and set(medians) == set(first) == {"t2n", "peer"}  # warm-up + 3
    a, b = _Counting(), _Counting()
    speed_engines.time_interleaved({"t2n": a, "peer": b}, [], runs=3, min_seconds=10.0)
    assert a.calls == b.calls == 2001  # warm-up + the cap
    a, b = _Counting(), _Counting()
    speed_engines.time_interleaved({"t2n": a, "peer": b}, [], runs=3, settle=True)
    assert a.calls == b.calls == 7  # warm-up + 3 x (untimed, timed)


def test_grid_write_of_some_cases_replaces_only_their_rows_and_notes(tmp_path):
    from benchmarks import artifact_grid

    head = "| case | cells | worst t2n / best peer |\n|---|---:|---:|\n"
    doc = tmp_path / "R.md"
    doc.write_text(f"intro\n{artifact_grid.GRID_BEGIN}\n## Over grids\n\nrun A\n\n{head}| gru | 3/3 | 1.30 |\n"
                   f"| lstm | 2/2 | 1.10 |\n| cumsum | 1/1 | 1.00 |\n\n* gru: old note\n* cumsum: kept\n"
                   f"{artifact_grid.GRID_END}\nafter\n")
    text = f"## Over grids\n\nrun B\n\n{head}| gru | 3/3 | 1.01 |\n| lstm | 2/2 | 1.02 |\n\n* gru: new note\n"
    artifact_grid.write_doc(doc, text, ["gru", "lstm"], ["--cases", "gru", "lstm"], "7.0-9.0")
    out = doc.read_text()
    assert "| gru | 3/3 | 1.01 |\n| lstm | 2/2 | 1.02 |\n| cumsum | 1/1 | 1.00 |" in out
    assert "old note" not in out and "* gru: new note" in out and "* cumsum: kept" in out
    assert "run A" in out and "run B" not in out and out.startswith("intro\n") and out.endswith("after\n")
    assert out.count("Rows of gru, lstm measured again") == 1 and "(load average 7.0-9.0)" in out
    artifact_grid.write_doc(doc, text, ["gru", "lstm"], ["--cases", "gru", "lstm"], "7.0-9.0")
    assert doc.read_text() == out  # writing the same rows again changes nothing


def test_grid_tables_of_every_cell_go_between_their_own_marks_after_the_grid_table(tmp_path):
    from benchmarks import artifact_grid

    doc = tmp_path / "R.md"
    doc.write_text(f"intro\n{artifact_grid.GRID_BEGIN}\n| case | cells |\n{artifact_grid.GRID_END}\n\nnotes kept\n")
    text = "| case | cells |\n| sort | 0/1 |\n"
    artifact_grid.write_doc(doc, text, tables={"sort": "| cell | ms |\n| a | 1 |\n"})
    out = doc.read_text()
    begin, end = artifact_grid.CELLS_BEGIN.format("sort"), artifact_grid.CELLS_END.format("sort")
    assert out.index(artifact_grid.GRID_END) < out.index(begin) < out.index("| a | 1 |") < out.index(end)
    assert out.index(end) < out.index("notes kept")
    artifact_grid.write_doc(doc, text, tables={"sort": "| cell | ms |\n| a | 2 |\n"})
    out = doc.read_text()
    assert "| a | 1 |" not in out and out.count(begin) == 1 and "| a | 2 |" in out and out.endswith("notes kept\n")


def test_a_side_failing_alike_at_every_cell_of_a_case_is_one_note():
    from benchmarks import artifact_grid

    failed = [("onnx", "a", "no TopK"), ("onnx", "b", "no TopK"), ("peer", "a", "wrong shape")]
    assert artifact_grid._failure_notes(failed, 2) == ["onnx at every cell (2): no TopK", "peer at `a`: wrong shape"]
    assert artifact_grid._failure_notes(failed[:1], 1) == ["onnx at `a`: no TopK"]


def test_sort_cells_export_their_sorted_axis_as_a_symbol():
    from benchmarks.grid_models import build, dynamic_axes

    assert dynamic_axes("sort dynamic=1 op=argsort desc=0 n=8 s=16") == {"input_0": {1: "S"}}
    assert dynamic_axes("sort dynamic=1 op=router s=16") == {"input_0": {0: "S"}}
    assert dynamic_axes("cumsum axis=2 c=1 s=8 n=1 conv=0") == {}
    model, (logits,) = build("sort dynamic=1 op=router s=16")
    assert logits.shape == (8, 8) and model(logits).shape == (16,)
