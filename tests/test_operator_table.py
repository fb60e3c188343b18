"""docs/operators.md must match the registry and the recorded evidence."""

from tools.operator_table import TABLE_PATH, generate


def test_operator_table_is_current():
    assert TABLE_PATH.read_text() == generate(), (
        "docs/operators.md is stale: run `python -m tools.operator_table` "
        "(and refresh docs/operator_evidence.json first if tests changed, see the file's header)"
    )
