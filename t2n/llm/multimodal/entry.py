"""How ``export_llm`` / ``t2n llm`` reach the multimodal export: a model object of a
multimodal family, or a checkpoint folder whose ``config.json`` names one, is exported
as encoders, decoder and manifest (see :mod:`t2n.llm.multimodal.export`)."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Any

import torch

from t2n.errors import CheckpointFolderError, InvalidArgumentError
from t2n.llm.multimodal.export import TextLayout
from t2n.llm.multimodal.families import FAMILIES, family_of

UNSUPPORTED_OPTIONS = ("compression", "merge_peft", "num_logits_to_keep", "force_inputs_dtype",
                       "sample_generation_total_size", "reify_rope", "reify_rms_norm", "window_kv_cache",
                       "dump_with_tokenizer_and_conf")
"""``export_llm`` options the multimodal export does not take yet (refused by name;
``num_logits_to_keep`` only above 1: its decoder returns every position's logits)."""

LOG = logging.getLogger(__name__)


MODEL_TYPES = {"gemma3": "Gemma3ForConditionalGeneration", "idefics3": "Idefics3ForConditionalGeneration",
               "smolvlm": "SmolVLMForConditionalGeneration", "mistral3": "Mistral3ForConditionalGeneration",
               "qwen2_5_vl": "Qwen2_5_VLForConditionalGeneration", "qwen3_vl": "Qwen3VLForConditionalGeneration",
               "voxtral": "VoxtralForConditionalGeneration"}
"""The multimodal class of a ``config.json`` that names no architecture, by model type."""


def _folder_architecture(path: Path) -> str | None:
    from t2n.llm.checkpoint import _read_config

    if not path.is_dir() or not (path / "config.json").is_file():
        return None
    config = _read_config(path)
    architectures = config.get("architectures") or []
    named = next((a for a in architectures if isinstance(a, str) and a in FAMILIES), None)
    if named is None and not architectures:  # a config saved alone names no class
        named = MODEL_TYPES.get(str(config.get("model_type")))
    return named


def is_multimodal(model_or_dir: Any) -> bool:
    """Whether ``model_or_dir`` is a multimodal model (object or folder) t2n exports."""
    if isinstance(model_or_dir, (str, os.PathLike)):
        return _folder_architecture(Path(model_or_dir)) is not None
    return isinstance(model_or_dir, torch.nn.Module) and family_of(model_or_dir) is not None


def _load(folder: Path, trust_remote_code: bool) -> torch.nn.Module:
    import transformers

    architecture = _folder_architecture(folder)
    if not sorted(folder.glob("*.safetensors")):
        raise CheckpointFolderError(
            f"{folder} has no *.safetensors weights beside its config.json; save the model with "
            "model.save_pretrained(folder) (safetensors is its default)")
    model_class = getattr(transformers, str(architecture))
    model: torch.nn.Module = model_class.from_pretrained(folder, local_files_only=True,
                                                         trust_remote_code=trust_remote_code)
    return model


def export_multimodal_llm(model_or_dir: Any, out: Path, *, dtype: torch.dtype | None, verify: bool, target: Any,
                          text: TextLayout, naming: str, trust_remote_code: bool, kv_cache: str,
                          options: dict[str, Any]) -> Path:
    """``export_llm`` for a multimodal model: returns the path of ``multimodal.json``.
    What this call creates is removed if the export fails."""
    from t2n.llm.multimodal.export import export_multimodal

    given = [name for name in UNSUPPORTED_OPTIONS if options.get(name) is not None
             and not (name == "num_logits_to_keep" and options[name] in (0, 1))]
    if options.get("num_logits_to_keep") == 1:
        LOG.info("the multimodal decoder returns the logits of every position (num_logits_to_keep=1, "
                 "the text models' default, is not applied to it yet)")
    if kv_cache != "explicit":
        given.append(f"kv_cache={kv_cache!r}")
    if given:
        raise InvalidArgumentError(
            f"the multimodal export takes the explicit cache and no {', '.join(given)} yet; "
            "export without them")
    created = not out.exists()
    model = _load(Path(model_or_dir), trust_remote_code) if isinstance(model_or_dir, (str, os.PathLike)) \
        else model_or_dir
    if dtype is not None:
        model = model.to(dtype)
    if next(model.parameters()).dtype == torch.bfloat16:  # tract computes bf16 as f16
        model = model.to(torch.float16)
    out.mkdir(parents=True, exist_ok=True)
    try:
        return export_multimodal(model, out, target, text, verify=verify, naming=naming)
    except BaseException:
        if created:
            shutil.rmtree(out, ignore_errors=True)
        raise
