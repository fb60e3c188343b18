"""Export ``transformers`` language models to tract: decoder-only, vision- and
audio-language and encoder-decoder models, with their caches.

``export_llm(model_or_dir, export_dirpath, ...)`` writes the artifacts and their manifest
(see ``docs/llm.md``); ``generate(export_dir, inputs, max_new_tokens)`` runs any such
folder greedily in tract's Python package from a tokenizer's or processor's outputs
(``tract_greedy_generate``: a text export from token ids); ``export_peft``
writes only a LoRA/DoRA adapter's tensors. ``LLMExportOptions`` holds every option of an
export as one frozen object (``export_with_options(model_or_dir, out, options)``)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from t2n.llm.common.generate import tract_greedy_generate
    from t2n.llm.common.options import LLMExportOptions
    from t2n.llm.common.peft import export_peft
    from t2n.llm.entry import export_llm, export_with_options
    from t2n.llm.generation import generate

_LAZY = {
    "export_llm": "t2n.llm.entry",
    "export_with_options": "t2n.llm.entry",
    "LLMExportOptions": "t2n.llm.common.options",
    "tract_greedy_generate": "t2n.llm.common.generate",
    "export_peft": "t2n.llm.common.peft",
    "generate": "t2n.llm.generation",
}

__all__ = ["LLMExportOptions", "export_llm", "export_peft", "export_with_options", "generate",
           "tract_greedy_generate"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 't2n.llm' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
