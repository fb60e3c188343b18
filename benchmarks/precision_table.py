"""Largest error of f16 exports against the f32 PyTorch reference, with each f32-forcing
option of ``TractNNEF`` off and on.

    python -m benchmarks.precision_table            # writes the table into docs/precision.md
    python -m benchmarks.precision_table --print    # prints it only

Small ``transformers`` Llama, BERT and ViT (random weights, no downloads; the norms'
weights and biases drawn at random too, as a trained model's are, since the library's
initial 1 and 0 make their rounding invisible) are converted to f16 and exported once
per option set. Each artifact runs in tract on the same inputs; the table gives its
largest absolute error over every output against the f32 PyTorch model with the same
(f16-rounded) weights, and whether ``check()`` passes against PyTorch in f16 at the
default tolerance.
"""

from __future__ import annotations

import argparse
import copy
import re
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch

import t2n
from t2n.errors import CheckMismatchError

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "precision.md"
START, END = "<!-- precision-table:start -->", "<!-- precision-table:end -->"

OPTIONS: list[tuple[str, dict[str, bool]]] = [
    ("off", {}),
    ("attention", {"force_attention_inner_in_f32": True}),
    ("linear", {"force_linear_accumulation_in_f32": True}),
    ("norm", {"force_norm_in_f32": True}),
    ("all", {"force_attention_inner_in_f32": True, "force_linear_accumulation_in_f32": True,
             "force_norm_in_f32": True}),
]

Model = tuple[torch.nn.Module, tuple[torch.Tensor, ...]]


def _randomize_norms(model: torch.nn.Module) -> torch.nn.Module:
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if re.search(r"(norm|LayerNorm)[^.]*\.(weight|bias)$", name):
                base = 1.0 if name.endswith("weight") else 0.0
                p.copy_(base + torch.randn(p.shape, generator=g))
    return model


def llama() -> Model:
    import transformers as tf

    cfg = tf.LlamaConfig(vocab_size=256, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         use_cache=False)
    cfg._attn_implementation = "eager"
    ids = torch.randint(0, 256, (1, 32), generator=torch.Generator().manual_seed(0))
    return tf.LlamaForCausalLM(cfg), (ids,)


def bert() -> Model:
    import transformers as tf

    cfg = tf.BertConfig(vocab_size=256, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=256, max_position_embeddings=64)
    cfg._attn_implementation = "eager"
    ids = torch.randint(0, 256, (1, 32), generator=torch.Generator().manual_seed(0))
    return tf.BertModel(cfg), (ids,)


def vit() -> Model:
    import transformers as tf

    cfg = tf.ViTConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=256,
                       image_size=32, patch_size=4, num_channels=3)
    cfg._attn_implementation = "eager"
    return tf.ViTModel(cfg), (torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(0)),)


MODELS: dict[str, Callable[[], Model]] = {"Llama": llama, "BERT": bert, "ViT": vit}


def _outputs(model: torch.nn.Module, args: Sequence[torch.Tensor]) -> list[np.ndarray]:
    with torch.no_grad():
        out = model(*args)
    values = out.values() if hasattr(out, "values") else (out if isinstance(out, tuple) else (out,))
    return [v.float().numpy() for v in values if isinstance(v, torch.Tensor)]


def _max_error(got: Sequence[np.ndarray], want: Sequence[np.ndarray]) -> float:
    return max(float(np.max(np.abs(g.astype(np.float64) - w.astype(np.float64)))) for g, w in zip(got, want))


def _run(art: t2n.Artifact, expected: Sequence[np.ndarray]) -> float:
    try:
        report = art.check("very_loose", inputs=art.example_inputs, expected=list(expected))
    except CheckMismatchError as exc:
        report = exc.report
    return float(report.max_abs)  # type: ignore[attr-defined]


def _passes_check(art: t2n.Artifact) -> bool:
    try:
        art.check()
    except CheckMismatchError:
        return False
    return True


def measure(name: str) -> dict[str, tuple[float, bool]]:
    """Per column (``PyTorch f16`` and each option set): max abs error vs f32, check ok."""
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, args = MODELS[name]()
        model = _randomize_norms(model.eval()).half()
    args16 = tuple(a.half() if a.is_floating_point() else a for a in args)
    ref32 = _outputs(copy.deepcopy(model).float(), tuple(a.float() if a.is_floating_point() else a for a in args))
    row = {"PyTorch f16": (_max_error(_outputs(model, args16), ref32), True)}
    for label, flags in OPTIONS:
        art = t2n.compile(model, args16, t2n.TractNNEF(**flags))
        row[label] = (_run(art, ref32), _passes_check(art))
    return row


def table(rows: dict[str, dict[str, tuple[float, bool]]]) -> str:
    cols = ["PyTorch f16", *(label for label, _ in OPTIONS)]
    lines = ["| model | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for name, row in rows.items():
        cells = [f"{row[c][0]:.3g}" + ("" if row[c][1] else " ✗") for c in cols]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write(text: str, doc: Path = DOC) -> None:
    body = doc.read_text()
    if START not in body or END not in body:
        raise SystemExit(f"{doc} has no {START} … {END} block to replace")
    head, rest = body.split(START, 1)
    _, tail = rest.split(END, 1)
    doc.write_text(f"{head}{START}\n{text}\n{END}{tail}")


def main(argv: Sequence[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--print", action="store_true", help="print the table, do not write the doc")
    parser.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    opts = parser.parse_args(argv)
    text = table({name: measure(name) for name in opts.models})
    print(text)
    if not opts.print:
        write(text)
        print(f"written to {DOC}")
    return text


if __name__ == "__main__":
    main()
