"""Reading a local ``transformers`` checkpoint folder for ``t2n.llm``: every problem a
folder can have is found and named before anything is written or traced."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from t2n.errors import (
    CheckpointFolderError,
    InvalidArgumentError,
    T2NError,
    UnsupportedArchitectureError,
)

if TYPE_CHECKING:
    import transformers

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json",
                   "merges.txt", "special_tokens_map.json", "added_tokens.json", "vocab.txt")
"""Files beside a checkpoint that make up its tokenizer (copied when asked)."""

PROCESSOR_FILES = (*TOKENIZER_FILES, "preprocessor_config.json", "processor_config.json", "chat_template.json",
                   "chat_template.jinja", "video_preprocessor_config.json")
"""Files beside a multimodal checkpoint that make up its processor (its tokenizer's, the
image or audio preprocessor's and the chat template): ``AutoProcessor`` loads them from
one folder."""

CONFIG_FILES = ("config.json", "generation_config.json")

PROVEN_FAMILIES = ("Llama", "Qwen2", "Qwen3", "Mistral", "Phi3", "Gemma2", "Gemma3 (text)", "GPT-2",
                   "GPT-NeoX", "GPT-J", "OLMo", "Mixtral", "Qwen2-MoE", "Qwen3-MoE", "OLMoE", "Granite-MoE",
                   "GPT-OSS", "DeepSeek-V3", "Qwen3-Next", "Mamba", "Falcon-Mamba", "Mamba-2", "Falcon-H1",
                   "Jamba")
"""Families the tests prove to generate transformers' tokens (named in errors; every
family's status is in :mod:`t2n.llm.common.families`)."""

_SUPPORTED = (f"t2n.llm exports the *ForCausalLM models of transformers (proven to generate the "
              f"same tokens: {', '.join(PROVEN_FAMILIES)}); export other models with t2n.export")


def read_config(folder: Path) -> dict[str, object]:
    path = folder / "config.json"
    if not path.is_file():
        raise CheckpointFolderError(
            f"{folder} has no config.json: give the folder of a transformers checkpoint "
            "(config.json beside its *.safetensors weights, as save_pretrained writes it)")
    return read_json_object(path, CheckpointFolderError, "rewrite it with config.save_pretrained()")


def read_json_object(path: Path, error: type[T2NError], remedy: str) -> dict[str, object]:
    """The JSON object in ``path``; ``error`` (saying ``remedy``) when it is unreadable,
    not JSON or not an object."""
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise error(f"{path} cannot be read as JSON ({exc}); {remedy}") from exc
    if not isinstance(value, dict):
        raise error(f"{path} is not a JSON object; {remedy}")
    return {str(k): v for k, v in value.items()}


def check_architecture(architectures: list[str] | None, model_type: str | None, where: str) -> None:
    """Refuse a model that is not a causal LM ``transformers`` knows, naming it, and a
    family :mod:`t2n.llm.common.families` refuses, with its reason."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    from t2n.llm.common.families import refusal

    known = set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.values())
    names = list(architectures or [])
    for name in names:
        if name not in known:
            raise UnsupportedArchitectureError(
                f"{where} names the architecture {name!r}, which is not a causal language model "
                f"transformers provides; {_SUPPORTED}",
                architecture=name)
    if not names and model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        raise UnsupportedArchitectureError(
            f"{where} has model_type {model_type!r}, which has no causal language model in "
            f"transformers; {_SUPPORTED}",
            architecture=str(model_type))
    reason = refusal(model_type)
    if reason is not None:
        raise UnsupportedArchitectureError(
            f"{where}: t2n.llm does not export model type {model_type!r}: {reason} (the families "
            "t2n.llm exports and refuses are listed in docs/llm.md, section Families)",
            architecture=names[0] if names else str(model_type))


def check_folder(folder: Path) -> dict[str, object]:
    """The folder's config after checking it holds a causal LM and safetensors weights."""
    if not folder.is_dir():
        raise CheckpointFolderError(f"{folder} is not a folder: give the folder of a transformers "
                                    "checkpoint (config.json and *.safetensors)")
    config = read_config(folder)
    architectures = config.get("architectures")
    names = architectures if isinstance(architectures, list) and all(isinstance(a, str) for a in architectures) \
        else None
    if architectures is not None and names is None:
        raise CheckpointFolderError(
            f"{folder / 'config.json'}: 'architectures' must be a list of class names (e.g. "
            f"[\"LlamaForCausalLM\"]), got {architectures!r}; rewrite it with config.save_pretrained()")
    model_type = config.get("model_type")
    check_architecture(names, None if model_type is None else str(model_type), str(folder / "config.json"))
    check_weights(folder)
    return config


def check_weights(folder: Path) -> None:
    """The folder holds safetensors weights, every shard inside it."""
    if not sorted(folder.glob("*.safetensors")):
        raise CheckpointFolderError(
            f"{folder} has no *.safetensors weights beside its config.json; save the model with "
            "model.save_pretrained(folder) (safetensors is its default)")
    check_shards_inside(folder)


def check_shards_inside(folder: Path) -> None:
    """Every shard (by the index, or in the folder) lies inside the folder: an index
    naming ``../x.safetensors``, an absolute path or a link to elsewhere is refused
    before transformers or t2n reads anything there."""
    from t2n.errors import CorruptCheckpointError, CorruptTensorFileError
    from t2n.serialize.safetensors_reader import safetensors_files

    try:
        safetensors_files(folder)
    except CorruptTensorFileError as exc:
        raise CorruptCheckpointError(
            f"{exc}; the checkpoint in {folder} is damaged or points elsewhere: download or save it "
            "again (model.save_pretrained(folder))") from exc


def config_of(model: torch.nn.Module) -> transformers.PretrainedConfig:
    """``model.config``: the configuration of a ``transformers`` model (refused, naming the
    model's class, when it has none)."""
    from transformers import PretrainedConfig

    config = getattr(model, "config", None)
    if not isinstance(config, PretrainedConfig):
        raise InvalidArgumentError(f"{type(model).__name__} has no transformers configuration (its config is "
                                   f"{type(config).__name__}): give a transformers PreTrainedModel")
    return config


def load_folder(folder: Path, *, dtype: torch.dtype | None, trust_remote_code: bool) -> torch.nn.Module:
    """The causal LM of ``folder``, read from local files only (never the network)."""
    from safetensors import SafetensorError
    from transformers import AutoModelForCausalLM

    check_folder(folder)
    settle_device_constructors()
    try:
        loaded: Any = AutoModelForCausalLM.from_pretrained(
            str(folder), local_files_only=True, trust_remote_code=trust_remote_code,
            dtype=dtype if dtype is not None else "auto", output_loading_info=True,
            ignore_mismatched_sizes=True)  # reported by name below instead
    except config_errors() as exc:
        raise config_error(folder, exc) from exc
    except (OSError, ValueError, KeyError, RuntimeError, SafetensorError) as exc:
        raise CheckpointFolderError(
            f"the checkpoint in {folder} cannot be loaded by transformers: {exc}; check that its "
            "safetensors shards are complete and match config.json") from exc
    model, info = loaded
    _refuse_disagreement(folder, info)
    model.eval()
    return model  # type: ignore[no-any-return]


def config_errors() -> tuple[type[Exception], ...]:
    """What transformers raises for a ``config.json`` whose fields have the wrong types or
    disagree (huggingface_hub's strict dataclass validation), besides ValueError/TypeError."""
    try:
        from huggingface_hub.errors import StrictDataclassError
    except ImportError:  # an older huggingface_hub validates nothing
        return (TypeError, AttributeError)
    return (StrictDataclassError, TypeError, AttributeError)  # AttributeError: an unknown dtype name


def config_error(folder: Path, exc: BaseException) -> CheckpointFolderError:
    """The error for a ``config.json`` that transformers refuses (its message names the field)."""
    why = " ".join(str(exc).split())
    return CheckpointFolderError(
        f"{folder / 'config.json'} is not a configuration transformers accepts: {why}; fix that "
        "field (or rewrite the file with config.save_pretrained())")


def settle_device_constructors() -> None:
    """PyTorch lists the factory functions a ``with torch.device(...)`` block redirects
    once per process, the first time such a block runs one. ``from_pretrained`` runs its
    first one while ``torch.linspace`` is temporarily replaced, so the list would keep
    the replacement and ``torch.linspace`` would ignore every later device block (a meta
    model's buffers made on the CPU). Running one first keeps the list right."""
    with torch.device("cpu"):
        torch.empty(0)


def _refuse_disagreement(folder: Path, info: dict[str, Any]) -> None:
    """transformers fills weights missing from the shards with random values (and skips
    extra or mis-shaped ones) with only a log line: an export of that would generate
    garbage, so each such tensor is named instead."""
    problems = []
    for key, what in (("missing_keys", "missing from the shards"),
                      ("unexpected_keys", "in the shards but not in the model config.json describes"),
                      ("mismatched_keys", "of another shape than config.json says")):
        names = sorted(str(k if isinstance(k, str) else k[0]) for k in info.get(key) or ())
        if names:
            shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
            problems.append(f"{len(names)} tensor(s) {what}: {shown}")
    if problems:
        raise CheckpointFolderError(
            f"the checkpoint in {folder} does not match its config.json: {'; '.join(problems)}; "
            "re-save the model with save_pretrained or fix config.json")


def copy_side_files(folder: Path | None, model: torch.nn.Module, out: Path, *,
                    files: tuple[str, ...] = TOKENIZER_FILES, into: str = "tokenizer") -> None:
    """The config (``OUT/config.json``) and, from a folder, the ``files`` that make up
    its tokenizer (``OUT/tokenizer/``; a multimodal model's processor files too, in
    ``OUT/processor/``) and ``generation_config.json`` beside the graph."""
    config_of(model).save_pretrained(str(out))
    if folder is None:
        return
    found = [folder / n for n in (*files, "generation_config.json") if (folder / n).is_file()]
    if found:
        (out / into).mkdir(exist_ok=True)
        for path in found:
            if path.name in files:
                (out / into / path.name).write_bytes(path.read_bytes())
            elif not (out / path.name).exists():
                (out / path.name).write_bytes(path.read_bytes())
