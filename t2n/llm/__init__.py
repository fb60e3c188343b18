"""Export ``transformers`` causal language models to tract with an explicit KV cache.

``export_llm(model_or_dir, export_dirpath, ...)`` writes ``model/model.nnef.tgz``,
``modes.json`` and ``tests/*.npz`` (see ``docs/llm.md``); ``tract_greedy_generate``
runs such an artifact token by token in tract's Python package; ``export_peft``
writes only a LoRA/DoRA adapter's tensors. ``LLMExportOptions`` holds every option of an
export as one frozen object (``export_with_options(model_or_dir, out, options)``)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from t2n.llm.export import export_llm, export_with_options
    from t2n.llm.generate import tract_greedy_generate
    from t2n.llm.options import LLMExportOptions
    from t2n.llm.peft import export_peft

_LAZY = {
    "export_llm": "t2n.llm.export",
    "export_with_options": "t2n.llm.export",
    "LLMExportOptions": "t2n.llm.options",
    "tract_greedy_generate": "t2n.llm.generate",
    "export_peft": "t2n.llm.peft",
}

__all__ = ["LLMExportOptions", "export_llm", "export_peft", "export_with_options", "tract_greedy_generate"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 't2n.llm' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
