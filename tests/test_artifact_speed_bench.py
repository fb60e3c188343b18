"""The artifact speed benchmark (benchmarks/artifact_speed.py) runs without the optional
``onnx`` package and says so, and names the models torch.onnx could not export."""

from __future__ import annotations

import sys

from benchmarks import artifact_speed


def test_without_onnx_the_onnx_columns_are_skipped_with_a_message(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx raises ImportError
    monkeypatch.setattr(artifact_speed, "DOC", tmp_path / "speed.md")
    text = artifact_speed.main(["--only", "cumsum", "--runs", "1", "--write"])
    row = next(line for line in text.splitlines() if line.startswith("| cumsum"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert float(cells[1]) > 0 and float(cells[2]) > 0, row
    assert cells[3:] == ["–", "–", "–"], row
    assert "onnx" in text and "pip install 't2n[bench]'" in text and "skipped" in text
    assert (tmp_path / "speed.md").read_text().endswith(text)


def test_a_model_torch_onnx_refuses_is_named_with_the_reason():
    rows = [{"model": "m", "t2n": {"load": 0.001, "run": 0.002}, "onnx_error": "UnsupportedOperatorError: aten::diff"}]
    text = artifact_speed.table(rows, None)
    assert "| m | 1.0 | 2.0 | – | – | – |" in text
    assert "* m: torch.onnx failed (UnsupportedOperatorError: aten::diff)" in text


def test_write_replaces_the_table_and_keeps_the_notes_after_the_keep_line(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "onnx", None)
    doc = tmp_path / "speed.md"
    doc.write_text(f"# old table\n| stale | row |\n\n{artifact_speed.KEEP}\n\n## Before\n\nhand-written\n")
    monkeypatch.setattr(artifact_speed, "DOC", doc)
    text = artifact_speed.main(["--only", "cumsum", "--runs", "1", "--write"])
    written = doc.read_text()
    assert "stale" not in written and text in written
    assert written.endswith(f"{artifact_speed.KEEP}\n\n## Before\n\nhand-written\n")


def test_results_md_section_shows_each_ratio_and_links_the_full_file(tmp_path):
    doc = tmp_path / "RESULTS_ARTIFACT_SPEED.md"
    assert "no table yet" in "\n".join(artifact_speed.results_section(doc))
    rows = [{"model": "gru", "t2n": {"load": 0.007, "run": 0.0017}, "onnx": {"load": 0.011, "run": 0.0016}}]
    doc.write_text(artifact_speed.table(rows, None) + f"\n{artifact_speed.KEEP}\n| old | 1 | 2 | 3 | 4 | 9.99 |\n")
    section = "\n".join(artifact_speed.results_section(doc))
    assert "| gru | 1.06 |" in section and "9.99" not in section
    assert "[RESULTS_ARTIFACT_SPEED.md](RESULTS_ARTIFACT_SPEED.md)" in section
