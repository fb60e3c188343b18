"""The frontend parity table (``python -m tools.parity_table``) and the expectation
patterns of ``tests/frontend_parity.py``."""

from __future__ import annotations

import json

import frontend_parity
import pytest

from tools import parity_table as parity

L = "tests/layers/test_conv.py::test_conv"
A = "tests/architectures/test_transformers.py::test_architecture_in_tract_and_khronos"


def rec(frontend, outcome="passed", **targets):
    return {"frontend": frontend, "outcome": outcome, "targets": targets}


RESULTS = {
    f"{L}[k3-jit]": rec("jit", tract="ok", khronos="ok"),
    f"{L}[k3-export]": rec("export", tract="ok", khronos="ok"),
    f"{L}[k5-jit]": rec("jit", tract="ok", khronos="refused"),
    f"{L}[k5-export]": {**rec("export", "xfailed", tract="ok"), "reason": "export frontend: rule missing: aten::foo"},
    f"{A}[llama-jit]": rec("jit", tract="ok", khronos="ok"),
    f"{A}[llama-export]": {**rec("export", "failed"), "error": "TraceError: data-dependent"},
    "tests/dynamic/test_dynamic_axes.py::test_invalid": {**rec("jit"), "jit_only": "calls t2n.compile"},
}


@pytest.mark.parametrize("nodeid, base", [
    (f"{L}[k3-export]", f"{L}[k3]"),
    (f"{L}[k3-jit]", f"{L}[k3]"),
    ("tests/layers/test_x.py::test_y[export]", "tests/layers/test_x.py::test_y"),
    ("tests/layers/test_x.py::test_y", "tests/layers/test_x.py::test_y"),
    ("tests/layers/test_x.py::test_y[export-jit]", "tests/layers/test_x.py::test_y[export]"),
])
def test_base_id_drops_only_the_trailing_frontend(nodeid, base):
    assert parity.base_id(nodeid) == base


@pytest.mark.parametrize("nodeid, fam", [
    (f"{L}[k3-export]", ("layers", "conv")),
    (f"{A}[llama-jit]", ("architectures", "llama")),
    ("tests/architectures/test_vision.py::test_small_unet[export]", ("architectures", "small_unet")),
    ("tests/dynamic/test_dynamic_transformers.py::test_sequence_length_is_dynamic[gpt2-jit]", ("dynamic", "gpt2")),
    ("tests/dynamic/test_dynamic_models.py::test_sdpa[export]", ("dynamic", "dynamic_models")),
])
def test_families(nodeid, fam):
    assert parity.family(nodeid) == fam


def test_table_counts_cases_per_frontend_and_target():
    text = parity.render(RESULTS)
    assert "`jit`: **4** of 4 cases pass" in text
    assert "`export`: **1** of 3 cases pass (1 failed, 1 xfailed)" in text
    assert "passes 1 of the 4 cases the jit frontend passes" in text and "1 cases run with jit only" in text
    assert "| layers | conv | 2 | 2/2 | 1/2 (+1 refused) | 2/2 | 1/2 |" in text
    assert "| architectures | llama | 1 | 1/1 | 1/1 | 0/1 | 0/1 |" in text
    assert "| 1 | rule missing: aten::foo |" in text and "| 1 | TraceError: data-dependent |" in text
    assert text.index("| layers |") < text.index("| architectures |") < text.index("| dynamic |")


def test_table_replaces_only_its_own_part_of_the_document():
    prose = "# Frontends\n\nHand-written prose.\n\n"
    first = parity.replace_table(prose + "## After\n", parity.render(RESULTS))
    assert first.startswith(prose) and parity.BEGIN in first
    again = parity.replace_table(first, parity.render({}))
    assert again.count(parity.BEGIN) == 1 and again.count(parity.END) == 1
    assert again.startswith(prose) and "Hand-written prose." in again
    assert "**0** of 0 cases pass" in again


def test_write_from_a_results_file(tmp_path, monkeypatch):
    doc = tmp_path / "frontends.md"
    doc.write_text("# Frontends\n\nprose\n")
    results = tmp_path / "parity.json"
    results.write_text(json.dumps(RESULTS))
    monkeypatch.setattr(parity, "DOC_PATH", doc)
    assert parity.main(["--write", str(results)]) == 0
    text = doc.read_text()
    assert text.startswith("# Frontends\n\nprose\n") and "| layers | conv |" in text


def test_without_write_it_prints_its_usage_and_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(parity, "DOC_PATH", tmp_path / "frontends.md")
    assert parity.main([]) == 2
    assert "--write" in capsys.readouterr().out and not (tmp_path / "frontends.md").exists()


@pytest.mark.parametrize("pattern, nodeid, matches", [
    ("tests/layers/test_rnn.py::test_gru[*-export]", "tests/layers/test_rnn.py::test_gru[a-b-export]", True),
    ("tests/layers/test_rnn.py::test_gru[*]", "tests/layers/test_rnn.py::test_gru[x]", True),
    ("tests/layers/test_rnn.py::test_gru[ab]", "tests/layers/test_rnn.py::test_gru[a]", False),  # brackets are literal
    ("tests/layers/test_rnn.py::test_gru", "tests/layers/test_rnn.py::test_gru[x-export]", False),  # whole id
    ("tests/layers/test_rnn.py::*", "tests/layers/test_rnn.py::test_lstm[export]", True),
])
def test_expectation_patterns(pattern, nodeid, matches):
    assert (frontend_parity.match({pattern: "why"}, nodeid) == "why") is matches


def test_every_expectation_names_a_reason():
    for table in (frontend_parity.EXPORT_XFAIL, frontend_parity.JIT_ONLY, frontend_parity.EXPORT_SLOW):
        for pattern, reason in table.items():
            assert pattern.startswith("tests/") and "::" in pattern, pattern
            assert isinstance(reason, str) and len(reason) > 10, pattern
