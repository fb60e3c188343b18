"""Write docs/zoo.md from the outcomes the zoo test recorded, and read it back for the test.

    T2N_ZOO_RESULTS=/tmp/zoo python -m pytest -n 2 -q -m slow tests/zoo
    python -m tests.zoo.report /tmp/zoo

The test writes one JSON file per case into ``$T2N_ZOO_RESULTS`` (and then skips its
comparison with the table); without it, each case fails when its row in docs/zoo.md shows
another status, so the table never drifts from what the code does.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

from .known import KNOWN_FAILURES
from .models import ZOO

DOC = Path(__file__).resolve().parents[2] / "docs" / "zoo.md"
FRONTENDS = ("jit", "export")
STATUSES = ("exact", "refused", "FAILED")

HEADER = """# The model zoo

Every architecture below is built from a tiny config of its class (transformers, torchaudio,
diffusers; random weights, no download), compiled with `t2n.compile(model, args)` for tract with each frontend
(`jit`, `export`) and run in tract by `artifact.check()`, compared with PyTorch's forward.

* **exact**: tract's outputs match PyTorch's (tolerance `approximate`).
* **refused: Error**: t2n refused with a typed error before writing anything.
* **FAILED: Error**: anything else: a wrong artifact (`CheckMismatchError`), an artifact tract
  refuses or crashes on, or an untyped exception. Each one is listed with its reason in
  `tests/zoo/known.py`; a FAILED case not listed there fails the test.

The models and their configs are in `tests/zoo/models.py`. This page is generated; the test
(`tests/zoo/test_zoo.py`, marked slow) fails when a row no longer says what the code does.
Regenerate it with:

```bash
rm -rf /tmp/zoo && T2N_ZOO_RESULTS=/tmp/zoo python -m pytest -n 2 -q -m slow tests/zoo
python -m tests.zoo.report /tmp/zoo
```
"""


def cell(rec: dict) -> str:
    return rec["status"] if not rec["error"] else f"{rec['status']}: {rec['error']}"


def _note(name: str, recs: dict[str, dict]) -> str:
    parts = []
    for fe in FRONTENDS:
        rec = recs.get(fe)
        if rec is None or rec["status"] == "exact":
            continue
        why = KNOWN_FAILURES[fe].get(name) or rec["detail"]
        parts.append(f"{fe}: {why}")
    return "; ".join(parts).replace("|", "\\|").replace("\n", " ")


def render(results: dict[tuple[str, str], dict]) -> str:
    lines = [HEADER, "## Counts", "",
             "| group | models | jit exact / refused / FAILED | export exact / refused / FAILED |",
             "|---|---|---|---|"]
    groups = list(dict.fromkeys(e.group for e in ZOO))
    for group in [*groups, "all"]:
        names = [e.name for e in ZOO if group in ("all", e.group)]
        counts = []
        for fe in FRONTENDS:
            c = Counter(results[(n, fe)]["status"] for n in names if (n, fe) in results)
            counts.append(" / ".join(str(c[s]) for s in STATUSES))
        lines.append(f"| {group} | {len(names)} | {counts[0]} | {counts[1]} |")
    lines += ["", "## Architectures", "", "| architecture | group | class | jit | export | note |",
              "|---|---|---|---|---|---|"]
    for e in ZOO:
        recs = {fe: results[(e.name, fe)] for fe in FRONTENDS if (e.name, fe) in results}
        jit, export = (cell(recs[fe]) if fe in recs else "not run" for fe in FRONTENDS)
        lines.append(f"| {e.name} | {e.group} | `{e.model}` | {jit} | {export} | {_note(e.name, recs)} |")
    return "\n".join(lines) + "\n"


def read_table(path: Path = DOC) -> dict[tuple[str, str], str]:
    """The status cell of every (architecture, frontend) docs/zoo.md shows."""
    table: dict[tuple[str, str], str] = {}
    if not path.exists():
        return table
    rows = path.read_text().split("## Architectures", 1)[-1].splitlines()
    for row in rows:
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) >= 5 and cells[2].startswith("`"):
            table[(cells[0], "jit")], table[(cells[0], "export")] = cells[3], cells[4]
    return table


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__)
        return 2
    results = {}
    for f in sorted(Path(argv[0]).glob("*.json")):
        rec = json.loads(f.read_text())
        results[(rec["name"], rec["frontend"])] = rec
    DOC.write_text(render(results))
    print(f"wrote {DOC} from {len(results)} outcomes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
