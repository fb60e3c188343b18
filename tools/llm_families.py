"""The causal-LM families of ``transformers`` and what ``t2n.llm`` does with each.

``python -m tools.llm_families sweep [TYPE ...] [--timeout S]``: for every causal-LM model
type of the installed transformers (or those named), build a tiny random model from its
configuration's defaults (2 layers, hidden 64, vocabulary 96, 4 experts...), export it
with ``t2n.llm.export_llm`` and compare 16 greedily generated tokens in tract with
``generate(do_sample=False)``. Child processes take the types in turn (one that hangs
is stopped and the rest go on in a new one); the outcomes go to
``tools/llm_families_sweep.json`` (what :mod:`t2n.llm.common.families` is written from).

``python -m tools.llm_families rows``: print the rows of :data:`t2n.llm.common.families.FAMILIES`
from those outcomes (the families the tests prove named with their forms, the others
proven by the sweep or refused with what went wrong).

``python -m tools.llm_families doc [--check]``: write the family table of
``docs/llm.md`` (between its ``families-table`` markers) from
:data:`t2n.llm.common.families.FAMILIES`; ``--check`` exits 1 when the page differs.
"""

from __future__ import annotations

import argparse
import json
import re
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
}
"""Sizes a tiny model takes (where its configuration has the field)."""


def _small_kwargs(defaults: dict[str, Any]) -> dict[str, Any]:
    from tools.tiny_configs import layer_count, per_layer_lists, token_ids_within

    out = {k: v for k, v in SMALL.items() if k in defaults}
    if "kv_lora_rank" in defaults or "q_lora_rank" in defaults:  # latent attention: as many kv heads,
        out["num_key_value_heads"] = 4  # its own head sizes
        out.pop("head_dim", None)
    if "rotary_dim" in defaults:
        out["rotary_dim"] = 8
    out.update(token_ids_within(defaults, SMALL["vocab_size"]))
    out.update(per_layer_lists(defaults, layer_count(defaults), 2, out))
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

    import t2n.llm.common.families
    from t2n.llm import export_llm, tract_greedy_generate

    t2n.llm.common.families.refusal = lambda model_type: None  # the sweep asks the export, not the registry it fills
    stage = "build"
    try:
        model = tiny_model(model_type)
        stage = "export"
        with tempfile.TemporaryDirectory() as scratch:
            export_llm(model, Path(scratch) / "out", verify=False)
            stage = "generate"
            prompt = torch.randint(1, 96, (1, 5), generator=torch.Generator().manual_seed(3))
            got = tract_greedy_generate(Path(scratch) / "out", prompt, 16)
        model.generation_config.eos_token_id = None  # 16 tokens, none of them kept from being chosen
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
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    from tools.children import run_in_children

    results = json.loads(SWEEP.read_text()) if SWEEP.exists() else {}
    pending = [t for t in types or sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES) if not (resume and t in results)]

    def record(result: dict[str, Any]) -> None:
        results[result["type"]] = result
        SWEEP.write_text(json.dumps(dict(sorted(results.items())), indent=1) + "\n")

    run_in_children("tools.llm_families", pending, "type", timeout, record)


T = "tests: "
TESTED = {
    "llama": T + "f32, f16, bf16 checkpoint, Q4_0, LoRA/DoRA merged, f32 cache of an f16 model, stateful cache, reified ops, streamed folder, `t2n llm`",
    "qwen2": T + "f32, f16, checkpoint folder (f32, f16), stateful cache, reified ops",
    "qwen3": T + "f32, streamed folder",
    "mistral": T + "f32, generating beyond its sliding window",
    "phi3": T + "f32",
    "olmo": T + "f32",
    "gpt2": T + "f32, stateful cache, reified SDPA, streamed folder",
    "gpt_neox": T + "f32, streamed folder (`embed_out` read as `lm_head`)",
    "gemma2": T + "f32, sliding window",
    "gemma3_text": T + "f32, sliding window, streamed folder",
    "gptj": T + "streamed folder (partial rotary, parallel residual; rotary table computed); sweep: f32",
    "mixtral": T + "`tract_moe_ffn`; f32, f16, streamed folder (f32, f16), Q4_0 experts (object and streamed)",
    "qwen2_moe": T + "`tract_moe_ffn`, shared expert beside it; f32, f16, streamed folder",
    "qwen3_moe": T + "`tract_moe_ffn`; f32, streamed folder",
    "olmoe": T + "`tract_moe_ffn` (softmax over all experts); f32, streamed folder",
    "granitemoe": T + "`tract_moe_ffn`; f32, streamed folder",
    "gpt_oss": T + "`tract_moe_ffn` with router and expert biases, interleaved clamped SwiGLU; attention sinks, sliding layers; f32, f16, streamed folder (f32, f16)",
    "deepseek_v3": T + "latent attention; grouped router and experts in standard operations; f32, streamed folder",
    "qwen3_next": T + "gated delta-net states as cache inputs/outputs (tract's gated delta-net op in f16 at head width 128); f32, f16 streamed folder; with experts as `tract_moe_ffn` (f32)",
    "mamba": T + "conv and state-space states as cache inputs/outputs; f32, f16 streamed folder",
    "falcon_mamba": T + "conv and state-space states as cache inputs/outputs; f32, f16 streamed folder",
    "mamba2": T + "conv and state-space states as cache inputs/outputs; f32, f16 streamed folder",
    "falcon_h1": T + "attention beside Mamba-2 mixers, their states as cache inputs/outputs; f32, f16 streamed folder",
    "jamba": T + "attention beside Mamba layers, their states as cache inputs/outputs; f32, f16 streamed folder (also with an f32 interface); with experts as `tract_moe_ffn` (f32)",
    "bamba": T + "attention beside Mamba-2 mixers, their states as cache inputs/outputs; f32, f16 streamed folder",
    "granitemoehybrid": T + "attention beside Mamba-2 mixers, their states as cache inputs/outputs, experts as `tract_moe_ffn` beside a shared MLP; f32, f16 streamed folder",
    "nemotron_h": T + "Mamba-2, attention and MLP blocks, the mixers' states as cache inputs/outputs; f32, f16 streamed folder",
    "zamba": T + "multi-head Mamba layers and a shared attention block, their states as cache inputs/outputs; f32, f16 streamed folder",
    "zamba2": T + "Mamba-2 layers and a shared attention block, their states as cache inputs/outputs; f32, f16 streamed folder",
    "afmoe": T + "sliding layers (generating beyond a 4-token window) and a global one, sigmoid router with expert bias, experts beside shared ones; f32, explicit and stateful cache (tests/llm/test_families_added.py; the sweep's tiny model has zero routers, whose ties tract and PyTorch break differently)",
    "cohere_compass_text": T + 'rotary over three equal position axes on text, a theta per layer type; f32, explicit and stateful cache (tests/llm/test_families_added.py)',
    "dots1": T + 'a dense layer, then routed experts beside a shared one; f32, explicit and stateful cache (tests/llm/test_families_added.py)',
    "lara_mini": "tests (transformers 5.25): Qwen3.5's gated delta-nets beside attention, their states as cache inputs/outputs; f32 (tests/llm/test_families_added.py)",
    "lfm2": T + 'gated short convolutions beside attention, their conv states as cache inputs/outputs; f32 (tests/llm/test_families_added.py)',
    "lfm2_moe": T + 'gated short convolutions beside attention, their conv states as cache inputs/outputs; a dense layer, then experts; f32 (tests/llm/test_families_added.py)',
    "lfm3": T + 'gated short convolutions beside attention, their conv states as cache inputs/outputs; f32 (tests/llm/test_families_added.py)',
    "olmo_hybrid": T + 'gated delta-nets (a projection each, beta doubled) beside attention, their states as cache inputs/outputs; f32 (tests/llm/test_families_added.py)',
    "qwen3_5": T + 'its text decoder (Qwen3_5ForCausalLM): gated delta-nets beside attention, their states as cache inputs/outputs; f32 (tests/llm/test_families_added.py)',
    "qwen3_5_moe": T + 'its text decoder (Qwen3_5MoeForCausalLM): gated delta-nets beside attention, experts; f32 (tests/llm/test_families_added.py)',
    "qwen3_5_moe_text": T + 'gated delta-nets (split projections) beside attention, their states as cache inputs/outputs, experts beside a shared expert; f32 (tests/llm/test_families_added.py)',
    "qwen3_5_text": T + 'gated delta-nets (split projections) beside attention, their states as cache inputs/outputs; rotary over three equal position axes on text; f32 (tests/llm/test_families_added.py)',
    "youtu": T + 'latent attention; f32, explicit and stateful cache (tests/llm/test_families_added.py)',
}
"""Families the tests prove (``tests/llm/``), with the forms they prove."""


def rows(tested: dict[str, str], refused: dict[str, str]) -> str:
    """The rows of :data:`t2n.llm.common.families` as Python source, from the sweep's outcomes:
    ``tested`` (type → note) are proven by the tests, ``refused`` (type → reason) refused
    whatever the sweep found; the other types are proven when the sweep generated
    transformers' tokens, else refused with what went wrong."""
    results = json.loads(SWEEP.read_text())
    out = []
    for model_type, result in sorted(results.items()):
        if model_type in tested:
            out.append(f"    _proven({model_type!r}, {tested[model_type]!r}),")
        elif model_type in refused:
            out.append(f"    _refused({model_type!r}, {refused[model_type]!r}),")
        elif result["outcome"] == "identical":
            out.append(f"    _proven({model_type!r}, SWEEP),")
        else:
            out.append(f"    _refused({model_type!r}, {reason(result)!r}),")
    return "\n".join(out)


KNOWN_CAUSES = (
    (("'NoneType' object has no attribute 'layers'", "object has no attribute 'past_key_values'"),
     "its output holds no key/value cache (a recurrent or encoder model): export it with t2n.export"),
    (("has no attribute 'layers'",),
     "it returns no key/value cache (an encoder used as a decoder): export it with t2n.export"),
    (("object has no attribute 'past_key_values'",),
     "its output holds no key/value cache (a recurrent or encoder model): export it with t2n.export"),
    (("can only be called on Attention layers",),
     "not proven: the tiny model the sweep builds from its configuration's defaults has only recurrent "
     "layers, on which transformers' cache cannot count the tokens seen (its hybrids with attention "
     "layers may export: the proven ones are listed here)"),
    (("conv state", "LinearAttentionLayer", "matC_old"),
     "it keeps a recurrent state (state-space, linear-attention or xLSTM layers) that the exported cache "
     "does not hold yet: export it with t2n.export"),
    (("update_indexer", "store_compression"),
     "its attention keeps an indexer or compression cache beside the keys and values, which the exported "
     "cache does not hold yet"),
    (("aten::polar",), "its complex-valued rotary embedding (aten::polar) has no lowering yet"),
    (("uses cache of its own",), "it keeps a cache of its own instead of transformers' DynamicCache"),
)


def reason(result: dict[str, Any]) -> str:
    """Why a family the sweep did not prove is refused, from what went wrong."""
    message = " ".join(result["message"].replace("|", "/").split())
    for needles, why in KNOWN_CAUSES:
        if any(n in message for n in needles):
            return why
    if result["outcome"] == "different":
        lists = [json.loads(m) for m in re.findall(r"\[[0-9, ]*\]", message)]
        first = next((i for i, (a, b) in enumerate(zip(*lists[:2])) if a != b), None) if len(lists) > 1 else None
        where = f" from token {first + 1} of 16" if first is not None else ""
        return (f"tract generates other tokens than transformers{where} on a tiny random model: not exported "
                "until this is found")
    if result["stage"] == "build":
        return ("not proven: the sweep could not build a tiny model from its configuration's defaults "
                f"({message[:160]})")
    if result["stage"] == "process":
        return f"not proven: the sweep's export did not finish ({message})"
    return f"its export fails ({message[:200]})"


def table() -> str:
    from t2n.llm.common.families import FAMILIES

    rows = ["| model type | status | how it is proven / why it is refused |", "| --- | --- | --- |"]
    for family in FAMILIES.values():
        rows.append(f"| `{family.model_type}` | {family.status} | {family.note} |")
    return "\n".join(rows)


def doc(check: bool) -> int:
    from tools.generated import write_between

    return write_between(DOC, BEGIN, END, table(), check, f"{DOC}'s family table is not the registry's: run python -m tools.llm_families doc")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sweep")
    s.add_argument("types", nargs="*")
    s.add_argument("--timeout", type=float, default=600)
    s.add_argument("--resume", action="store_true", help="skip the types already in the results")
    t = sub.add_parser("try")
    t.add_argument("types", nargs="+")
    sub.add_parser("rows", help="print the rows of t2n/llm/common/families.py from the sweep's outcomes")
    d = sub.add_parser("doc")
    d.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "sweep":
        sweep(args.types, args.timeout, args.resume)
    elif args.command == "rows":
        print(rows(TESTED, {}))
    elif args.command == "try":
        for model_type in args.types:
            print(json.dumps(try_one(model_type)), flush=True)
    else:
        return doc(args.check)
    return 0


if __name__ == "__main__":
    sys.exit(main())
