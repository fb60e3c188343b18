"""How ``export_llm`` / ``t2n llm`` reach the multimodal export: a model object of a
multimodal family, or a checkpoint folder whose ``config.json`` names one, is exported
as encoders, decoder and manifest (see :mod:`t2n.llm.multimodal.export`)."""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from t2n.errors import InvalidArgumentError
from t2n.llm.common.options import LLMExportOptions
from t2n.llm.common.streaming import quantized
from t2n.llm.multimodal.families import FAMILIES, family_of

if TYPE_CHECKING:
    import transformers

    from t2n.llm.common.streaming import StreamedCheckpoint

UNSUPPORTED_OPTIONS = ("force_inputs_dtype",
                       "sample_generation_total_size", "window_kv_cache")
"""``export_llm`` options the multimodal export does not take yet (refused by name)."""

LOG = logging.getLogger(__name__)


MODEL_TYPES = {"gemma3": "Gemma3ForConditionalGeneration", "idefics3": "Idefics3ForConditionalGeneration",
               "smolvlm": "SmolVLMForConditionalGeneration", "mistral3": "Mistral3ForConditionalGeneration",
               "qwen2_5_vl": "Qwen2_5_VLForConditionalGeneration", "qwen3_vl": "Qwen3VLForConditionalGeneration",
               "voxtral": "VoxtralForConditionalGeneration", "llava": "LlavaForConditionalGeneration",
               "paligemma": "PaliGemmaForConditionalGeneration", "llava_next": "LlavaNextForConditionalGeneration",
               "llava_onevision": "LlavaOnevisionForConditionalGeneration",
               "internvl": "InternVLForConditionalGeneration", "qwen2_audio": "Qwen2AudioForConditionalGeneration",
               "aya_vision": "AyaVisionForConditionalGeneration", "qwen2_vl": "Qwen2VLForConditionalGeneration"}
"""The multimodal class of a ``config.json`` that names no architecture, by model type."""


def _folder_architecture(path: Path) -> str | None:
    from t2n.llm.common.checkpoint import read_config

    if not path.is_dir() or not (path / "config.json").is_file():
        return None
    config = read_config(path)
    architectures = config.get("architectures") or []
    named = next((a for a in architectures if isinstance(a, str) and a in FAMILIES), None) \
        if isinstance(architectures, list) else None
    if named is None and not architectures:  # a config saved alone names no class
        named = MODEL_TYPES.get(str(config.get("model_type")))
    return named


def is_multimodal(model_or_dir: object) -> bool:
    """Whether ``model_or_dir`` is a multimodal model (object or folder) t2n exports."""
    if isinstance(model_or_dir, (str, os.PathLike)):
        return _folder_architecture(Path(model_or_dir)) is not None
    return isinstance(model_or_dir, torch.nn.Module) and family_of(model_or_dir) is not None


def _load(folder: Path, trust_remote_code: bool, dtype: torch.dtype | None) -> torch.nn.Module:
    """The folder's model loaded whole (the reference a streamed export is checked against, or
    the base an adapter is merged into)."""
    import transformers

    model_class = getattr(transformers, str(_folder_architecture(folder)))
    model: torch.nn.Module = model_class.from_pretrained(folder, local_files_only=True,
                                                         trust_remote_code=trust_remote_code,
                                                         dtype=dtype if dtype is not None else "auto")
    return _computed_dtype(model.eval())


def _computed_dtype(model: torch.nn.Module) -> torch.nn.Module:
    if next(model.parameters()).dtype == torch.bfloat16:  # tract computes bf16 as f16
        return model.to(torch.float16)
    return model


def meta_multimodal(folder: Path, *, dtype: torch.dtype | None, trust_remote_code: bool
                    ) -> tuple[torch.nn.Module, StreamedCheckpoint]:
    """The folder's multimodal model on the meta device and its shards (renamed and
    converted as ``from_pretrained`` does: ``save_pretrained`` writes the legacy names of
    Gemma 3, Mistral 3, Qwen2.5-VL, Voxtral), checked against each other: every weight
    streams from the shards into the encoder and decoder artifacts."""
    import transformers

    from t2n.llm.common.checkpoint import check_weights
    from t2n.llm.common.streaming import meta_model_of

    check_weights(folder)
    model_class = getattr(transformers, str(_folder_architecture(folder)))

    def build(config: transformers.PretrainedConfig, chosen: torch.dtype) -> transformers.PreTrainedModel:
        model: transformers.PreTrainedModel = model_class._from_config(config, dtype=chosen)
        return model

    return meta_model_of(folder, build, dtype=dtype, trust_remote_code=trust_remote_code)


def _reference(folder: Path, shards: StreamedCheckpoint, dtype: torch.dtype | None, trust_remote_code: bool,
               compression: str | None = None) -> torch.nn.Module | None:
    """The folder's model loaded whole to check the streamed artifacts, when it fits the
    memory budget (else None, with a warning saying they are not checked); quantized as
    the streamed export was."""
    from t2n.llm.common.streaming import REFERENCE_MEMORY_FRACTION, fits_in_memory

    if not fits_in_memory(shards):
        LOG.warning("the weights of %s take %.1f GB, more than %d%% of the memory available: the model "
                    "is not loaded in PyTorch, so the artifacts are not verified against it (run them "
                    "with tract_multimodal_generate on a machine with more memory to check them)",
                    folder, shards.nbytes / 1e9, round(100 * REFERENCE_MEMORY_FRACTION))
        return None
    return quantized(_load(folder, trust_remote_code, dtype), compression)


def _source(model_or_dir: transformers.PreTrainedModel | str | os.PathLike[str], opts: LLMExportOptions
            ) -> tuple[torch.nn.Module, Path | None, StreamedCheckpoint | None,
                       Callable[[], torch.nn.Module | None] | None]:
    """(the model to export, its folder, its shards, the loaded reference's maker): a
    folder's model is built on the meta device (its weights streamed from the shards), an
    object is taken as it is; with an adapter to merge (``merge_peft``), a folder's model
    is loaded whole and merged; then quantized as ``compression`` asks."""
    dtype, compression, adapter = opts.torch_dtype(), opts.compression, opts.merge_peft
    trust = opts.trust_remote_code
    folder = Path(model_or_dir) if isinstance(model_or_dir, (str, os.PathLike)) else None
    if folder is not None and adapter is None:
        model, shards = meta_multimodal(folder, dtype=dtype, trust_remote_code=trust)
        return (quantized(_computed_dtype(model), compression, shards), folder, shards,
                lambda: _reference(folder, shards, dtype, trust, compression))
    if isinstance(model_or_dir, torch.nn.Module):
        given: torch.nn.Module = model_or_dir  # its own methods (transformers wraps ``to``)
        model = given.to(dtype) if dtype is not None else given
    else:  # a folder, loaded in ``dtype``
        model = _load(Path(model_or_dir), trust, dtype)
    if adapter is not None:
        from t2n.llm.common.peft import merge_adapter

        model = merge_adapter(model, adapter)
    return quantized(_computed_dtype(model), compression, None), folder, None, None


def _refuse_unsupported(opts: LLMExportOptions) -> None:
    given = [name for name in UNSUPPORTED_OPTIONS if getattr(opts, name) not in (None, False)]
    if given:
        raise InvalidArgumentError(
            f"the multimodal export takes no {', '.join(given)} yet; export without them")


def export_multimodal_llm(model_or_dir: transformers.PreTrainedModel | str | os.PathLike[str], out: Path,
                          opts: LLMExportOptions) -> Path:
    """``export_llm`` for a multimodal model (its options ``opts``, checked): returns the
    path of ``multimodal.json``. A checkpoint folder is streamed: the model is built on the
    meta device and every weight is read from the shards as the artifacts are written
    (loaded whole only to verify them, when it fits in memory). What this call creates is
    removed if the export fails."""
    from t2n.llm.common.checkpoint import PROCESSOR_FILES, copy_side_files
    from t2n.llm.multimodal.export import export_multimodal

    _refuse_unsupported(opts)
    model, folder, shards, reference = _source(model_or_dir, opts)
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    try:
        manifest = export_multimodal(model, out, opts, shards=shards, reference=reference)
        if opts.dump_with_tokenizer_and_conf:
            copy_side_files(folder, model, out, files=PROCESSOR_FILES, into="processor")
        return manifest
    except BaseException:
        if created:
            shutil.rmtree(out, ignore_errors=True)
        raise
