"""The family registry covers every causal-LM model type of the declared transformers releases,
``docs/llm.md`` shows it as it is, and a refused family is refused before anything is
written, with its reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from t2n.errors import UnsupportedArchitectureError
from t2n.llm import export_llm
from t2n.llm.common.families import FAMILIES, PROVEN, REFUSED, refusal

from .tiny_hybrid import HYBRID_FAMILIES
from .tiny_models import MOE_FAMILIES


def test_every_causal_lm_type_has_a_row() -> None:
    """Every type of the installed release (the pinned one or the newest declared: the
    registry also holds the types a newer release adds)."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    assert sorted(set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES) - set(FAMILIES)) == []
    assert all(f.status in (PROVEN, REFUSED) and f.note for f in FAMILIES.values())
    for family in (*MOE_FAMILIES, *HYBRID_FAMILIES, "llama", "qwen2", "gpt2", "gpt_neox", "gptj"):
        assert FAMILIES[family].status == PROVEN, family


def test_docs_table_is_the_registry() -> None:
    from tools.llm_families import doc

    assert doc(check=True) == 0, "run python -m tools.llm_families doc"


def test_refused_family_is_refused_with_its_reason(tmp_path: Path) -> None:
    import transformers as tf

    assert refusal("bert") is not None
    model = tf.BertLMHeadModel(tf.BertConfig(vocab_size=96, hidden_size=32, num_hidden_layers=1,
                                             num_attention_heads=2, intermediate_size=32, is_decoder=True))
    with pytest.raises(UnsupportedArchitectureError, match="does not export model type 'bert'") as info:
        export_llm(model, tmp_path / "out")
    assert refusal("bert") in str(info.value)
    assert not (tmp_path / "out").exists()
