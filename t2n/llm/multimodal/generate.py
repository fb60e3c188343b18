"""Greedy generation with an exported multimodal model in tract's Python package: the
encoder turns the raw input (pixel values) into embedding rows, the decoder's prefill
takes them with the prompt (whose placeholder tokens they replace), then one token at a
time with no rows. This is how the tests prove the artifacts generate what
``transformers`` generates from the same pixel values."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np


def tract_encode(export_dir: str | Path, *raw: Any, modality: str = "image") -> np.ndarray:
    """The encoder's embedding rows for ``raw`` (e.g. ``pixel_values``), run in tract."""
    return tract_encode_all(export_dir, *raw, modality=modality)[0]


def tract_encode_all(export_dir: str | Path, *raw: Any, modality: str = "image") -> list[np.ndarray]:
    """Every output of the encoder for ``raw``: the embedding rows, then the DeepStack
    streams of a Qwen3-VL."""
    import tract

    from t2n.backends.tract.child import _to_numpy
    from t2n.llm.generate import load_runnable

    out = Path(export_dir)
    manifest = json.loads((out / "multimodal.json").read_text())
    entry = next(e for e in manifest["encoders"] if e["modality"] == modality)
    runnable = load_runnable(out / entry["path"])
    return [np.asarray(_to_numpy(tract, np, o)) for o in runnable.run([np.asarray(r) for r in raw])]


class _Decoder:
    """The decoder of an export in tract, its cache, and the dtype and width of its rows."""

    def __init__(self, export_dir: str | Path) -> None:
        from t2n.llm.generate import load_runnable

        out = Path(export_dir)
        manifest = json.loads((out / "multimodal.json").read_text())
        modes = json.loads((out / manifest["decoder"]["modes"]).read_text())
        self.dtype = np.dtype(modes["cache"]["dtype"])
        self.hidden = int(modes["embeddings"]["shape"][1])
        self.runnable = load_runnable(out / manifest["decoder"]["path"])
        delta = [np.zeros(1, dtype=np.int64)] if "rope_delta" in modes else []
        self.streams = 1 + len(modes["embeddings"].get("deepstack", {}))
        self.cache = [np.zeros((1, modes["cache"]["kv_heads"], 0, modes["cache"]["head_dim"]), dtype=self.dtype)
                      for _ in range(len(modes["inputs"]) - 1 - self.streams - len(delta))] + delta

    def rows(self, rows: list[np.ndarray] | None = None) -> list[np.ndarray]:
        if rows is None:
            return [np.zeros((0, self.hidden), dtype=self.dtype)] * self.streams
        return [r.astype(self.dtype) for r in rows]

    def step(self, ids: np.ndarray, rows: list[np.ndarray] | None = None) -> list[np.ndarray]:
        """One call: ``rows`` the encoder's outputs for this call's placeholders (None: none)."""
        import tract

        from t2n.backends.tract.child import _to_numpy

        outputs = [_to_numpy(tract, np, o) for o in self.runnable.run([ids, *self.cache, *self.rows(rows)])]
        self.cache = outputs[1:]
        return outputs


def tract_prefill_logits(export_dir: str | Path, prompt_ids: Any, *raw: Any, modality: str = "image") -> np.ndarray:
    """The decoder's logits (``[1, 1, vocab]``, ``[1, S, vocab]`` from an export with
    ``num_logits_to_keep=0``) for ``prompt_ids`` with the encoder's rows of
    ``raw`` (none: a text-only prompt), run in tract."""
    decoder = _Decoder(export_dir)
    rows = tract_encode_all(export_dir, *raw, modality=modality) if raw else None
    return decoder.step(np.asarray(prompt_ids, dtype=np.int64).reshape(1, -1), rows)[0]


def tract_multimodal_generate(export_dir: str | Path, prompt_ids: Any, max_new_tokens: int, *raw: Any,
                              modality: str = "image") -> list[int]:
    """The ``max_new_tokens`` token ids tract's greedy choice gives after ``prompt_ids``
    (``[1, S]``, holding one placeholder token per embedding row) with the encoder's rows
    of ``raw`` (none: a text-only prompt)."""
    from t2n.llm.generate import _greedy

    decoder = _Decoder(export_dir)
    pending = [tract_encode_all(export_dir, *raw, modality=modality) if raw else None]

    def step(ids: np.ndarray) -> list[np.ndarray]:  # the rows go with the prefill only
        return decoder.step(ids, pending.pop() if pending else None)

    return _greedy(step, np.asarray(prompt_ids, dtype=np.int64).reshape(1, -1), max_new_tokens)
