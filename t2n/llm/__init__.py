"""Export ``transformers`` causal language models to tract with an explicit KV cache.

``export_llm(model_or_dir, export_dirpath, ...)`` writes ``model/model.nnef.tgz``,
``modes.json`` and ``tests/*.npz`` (see ``docs/llm.md``); ``tract_greedy_generate``
runs such an artifact token by token in tract's Python package."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from t2n.llm.export import export_llm
    from t2n.llm.generate import tract_greedy_generate

__all__ = ["export_llm", "tract_greedy_generate"]


def __getattr__(name: str) -> Any:
    if name == "export_llm":
        from t2n.llm.export import export_llm

        return export_llm
    if name == "tract_greedy_generate":
        from t2n.llm.generate import tract_greedy_generate

        return tract_greedy_generate
    raise AttributeError(f"module 't2n.llm' has no attribute {name!r}")
