"""The causal-LM families of ``transformers`` and what ``t2n.llm`` does with each.

``python -m tools.llm_families sweep [TYPE ...] [--timeout S]``: for every causal-LM model
type of the installed transformers (or those named), build a tiny random model from its
configuration's defaults (2 layers, hidden 64, vocabulary 96, 4 experts...), export it
with ``t2n.llm.export_llm`` and compare 16 greedily generated tokens in tract with
``generate(do_sample=False)``. Child processes take the types in turn (one that hangs
is stopped and the rest go on in a new one); the outcomes go to
``tools/llm_families_sweep.json`` (what :mod:`t2n.llm.families` is written from).

``python -m tools.llm_families doc [--check]``: write the family table of
``docs/llm.md`` (between its ``families-table`` markers) from
:data:`t2n.llm.families.FAMILIES`; ``--check`` exits 1 when the page differs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ROOT / "tools" / "llm_families_sweep.json"
DOC = ROOT / "docs" / "llm.md"
BEGIN, END = "<!-- families-table: begin -->", "<!-- families-table: end -->"

SMALL: dict[str, Any] = {
    "vocab_size": 96, "hidden_size": 64, "n_embd": 64, "d_model": 64, "dim": 64, "embed_dim": 64,
    "num_hidden_layers": 2, "n_layer": 2, "num_layers": 2, "n_layers": 2,
    "num_attention_heads": 4, "n_head": 4, "n_heads": 4, "num_heads": 4, "num_key_value_heads": 2,
    "intermediate_size": 128, "n_inner": 128, "ffn_dim": 128, "ffn_hidden_size": 128,
    "max_position_embeddings": 128, "n_positions": 128, "head_dim": 16,
    "num_local_experts": 4, "num_experts": 4, "n_routed_experts": 4, "num_experts_per_tok": 2,
    "moe_intermediate_size": 32, "shared_expert_intermediate_size": 64,
    "bos_token_id": None, "eos_token_id": None, "pad_token_id": 0,
}
"""Sizes a tiny model takes (where its configuration has the field)."""


def _small_kwargs(defaults: dict[str, Any]) -> dict[str, Any]:
    layers = next((defaults[k] for k in ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
                   if isinstance(defaults.get(k), int)), None)
    out = {k: v for k, v in SMALL.items() if k in defaults}
    for key, value in defaults.items():  # per-layer lists follow the layer count
        if isinstance(value, list) and layers and len(value) == layers and key not in out:
            out[key] = value[:2]
    return out


def tiny_model(model_type: str) -> Any:
    """A tiny random causal LM of ``model_type``."""
    import torch
    from transformers import CONFIG_MAPPING, AutoModelForCausalLM, PretrainedConfig

    cls = CONFIG_MAPPING[model_type]
    base = cls()
    kwargs = _small_kwargs(base.to_dict())
    for key, value in vars(base).items():  # sub-configurations (text_config...) shrunk too
        if isinstance(value, PretrainedConfig):
            kwargs[key] = type(value)(**{**value.to_dict(), **_small_kwargs(value.to_dict())})
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(cls(**kwargs)).eval()


def try_one(model_type: str) -> dict[str, Any]:
    """Build, export and compare one family; the outcome as a JSON-able dict."""
    import tempfile

    import torch

    from t2n.llm import export_llm, tract_greedy_generate

    stage = "build"
    try:
        model = tiny_model(model_type)
        stage = "export"
        with tempfile.TemporaryDirectory() as scratch:
            export_llm(model, Path(scratch) / "out", verify=False)
            stage = "generate"
            prompt = torch.randint(1, 96, (1, 5), generator=torch.Generator().manual_seed(3))
            got = tract_greedy_generate(Path(scratch) / "out", prompt, 16)
        with torch.no_grad():
            out = model.generate(prompt, max_new_tokens=16, min_new_tokens=16, do_sample=False,
                                 attention_mask=torch.ones_like(prompt), pad_token_id=0)
        expected = [int(t) for t in out[0, prompt.shape[1]:]]
        return {"type": model_type, "outcome": "identical" if got == expected else "different", "stage": stage,
                "message": "" if got == expected else f"tract {got} vs transformers {expected}"}
    except Exception as exc:  # the outcome, whatever it is
        message = " ".join(str(exc).split())[:300]
        return {"type": model_type, "outcome": "error", "stage": stage,
                "message": f"{type(exc).__name__}: {message}"}


def sweep(types: list[str], timeout: float, resume: bool) -> None:
    """Every type in child processes that each take the types left (a child that hangs
    past ``timeout`` on one type is stopped, that type recorded as timed out)."""
    import select
    import time

    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    results = json.loads(SWEEP.read_text()) if SWEEP.exists() else {}
    pending = [t for t in types or sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES) if not (resume and t in results)]
    while pending:
        child = subprocess.Popen([sys.executable, "-m", "tools.llm_families", "try", *pending],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
        assert child.stdout is not None
        deadline = time.monotonic() + timeout
        current = pending[0]
        while True:
            ready, _, _ = select.select([child.stdout], [], [], max(0.0, deadline - time.monotonic()))
            line = child.stdout.readline() if ready else None
            if line is None or (line == "" and child.poll() is not None):
                child.kill()
                why = f"timed out after {timeout:.0f} s" if line is None else "the process died"
                result = {"type": current, "outcome": "error", "stage": "process", "message": why}
            elif not line.startswith("{"):
                continue
            else:
                result = json.loads(line)
            results[result["type"]] = result
            print(json.dumps(result), flush=True)
            SWEEP.write_text(json.dumps(dict(sorted(results.items())), indent=1) + "\n")
            pending.remove(result["type"])
            if line is None or line == "" or not pending:
                break
            current, deadline = pending[0], time.monotonic() + timeout
        child.wait()


def table() -> str:
    from t2n.llm.families import FAMILIES

    rows = ["| model type | status | how it is proven / why it is refused |", "| --- | --- | --- |"]
    for family in FAMILIES.values():
        rows.append(f"| `{family.model_type}` | {family.status} | {family.note} |")
    return "\n".join(rows)


def doc(check: bool) -> int:
    text = DOC.read_text()
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < 0:
        print(f"{DOC} has no {BEGIN} ... {END} markers", file=sys.stderr)
        return 1
    new = text[:start + len(BEGIN)] + "\n" + table() + "\n" + text[end:]
    if check:
        if new != text:
            print(f"{DOC}'s family table is not the registry's: run python -m tools.llm_families doc",
                  file=sys.stderr)
            return 1
        return 0
    DOC.write_text(new)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sweep")
    s.add_argument("types", nargs="*")
    s.add_argument("--timeout", type=float, default=600)
    s.add_argument("--resume", action="store_true", help="skip the types already in the results")
    t = sub.add_parser("try")
    t.add_argument("types", nargs="+")
    d = sub.add_parser("doc")
    d.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "sweep":
        sweep(args.types, args.timeout, args.resume)
    elif args.command == "try":
        for model_type in args.types:
            print(json.dumps(try_one(model_type)), flush=True)
    else:
        return doc(args.check)
    return 0


if __name__ == "__main__":
    sys.exit(main())
