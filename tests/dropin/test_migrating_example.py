"""The migration example runs: a script for the other exporter, with only its imports changed."""

from __future__ import annotations

import re
import sys
import tarfile
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))

import migrating_from_torch_to_nnef as example  # noqa: E402


def test_example_exports_and_checks_both_targets(tmp_path):
    tract_path, khronos_path = example.main(tmp_path)
    assert tract_path == tmp_path / "keyword_spotter.nnef.tgz"
    with tarfile.open(tract_path, "r:gz") as tar:
        member = tar.extractfile("graph.nnef")
        assert member is not None
        text = member.read().decode()
    assert "tract_transformers_sdpa(" in text and "tract_assert S <= 1000" in text
    assert '("model_name", "keyword_spotter")' in text
    assert (khronos_path / "graph.nnef").read_text().startswith("version 1.0;")


def test_only_import_lines_name_t2n():
    """Apart from its import lines, the script uses the other exporter's names only."""
    source = (EXAMPLES / "migrating_from_torch_to_nnef.py").read_text()
    code = source.split('"""', 2)[2]
    lines = [line for line in code.splitlines() if "t2n" in line]
    assert lines and all(re.match(r"from t2n import ", line) for line in lines)
