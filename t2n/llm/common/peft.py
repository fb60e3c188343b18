"""LoRA and DoRA adapters (the ``peft`` package) for ``t2n.llm``.

``export_peft`` writes only an adapter's tensors (selected by regular expressions over
their names) as NNEF ``.dat`` files in one archive, so a base model shipped once can
take new adapters without a new graph. ``merge_adapter`` folds an adapter folder into
a model's weights (``peft``'s ``merge_and_unload``) before ``export_llm`` traces it.

Every problem an adapter can have (no ``adapter_config.json``, no weights, tensors of
another shape than the base's layers, modules the base does not have, patterns that
select nothing) is found and named before anything is written or changed.
"""

from __future__ import annotations

import logging
import os
import re
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from t2n.errors import AdapterError, InvalidArgumentError
from t2n.llm.common.checkpoint import read_json_object

if TYPE_CHECKING:
    import torch

LOG = logging.getLogger(__name__)

DEFAULT_PATTERNS = (
    r"\.lora_[AB]\.(?:[^.]+\.)?weight$",  # LoRA (and DoRA) low-rank factors of linear layers
    r"\.lora_embedding_[AB](?:\.[^.]+)?$",  # LoRA on embeddings
    r"\.lora_magnitude_vector(?:\.[^.]+)?(?:\.weight)?$",  # DoRA magnitudes
)
"""What ``export_peft`` selects by default: the tensors of a LoRA or DoRA adapter."""

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")
"""The files ``PeftModel.save_pretrained`` writes into an adapter folder."""

MERGEABLE = ("LORA",)
"""``peft_type`` values ``merge_adapter`` folds into the base weights (DoRA is a LoRA
with ``use_dora``)."""

_FACTOR = re.compile(r"^(?:base_model\.model\.)?(?P<module>.+)\.(?P<kind>lora_A|lora_B|lora_magnitude_vector)"
                     r"(?:\.[^.]+)?(?:\.weight)?$")


def read_adapter_config(folder: Path) -> dict[str, object]:
    """``adapter_config.json`` of an adapter folder, checked to be a JSON object."""
    if not folder.is_dir():
        raise AdapterError(f"{folder} is not a folder: give the folder PeftModel.save_pretrained wrote "
                           f"({ADAPTER_CONFIG} beside adapter_model.safetensors)")
    path = folder / ADAPTER_CONFIG
    if not path.is_file():
        raise AdapterError(f"{folder} has no {ADAPTER_CONFIG}: it is not a peft adapter folder; give the "
                           "folder PeftModel.save_pretrained wrote (or, to export tensors only, the "
                           "adapter_model.safetensors file itself)")
    return read_json_object(path, AdapterError, "save the adapter again with PeftModel.save_pretrained")


def adapter_weights(src: Path) -> Path:
    """The weights file of an adapter: ``src`` itself, or the one in the folder ``src``."""
    if src.is_file():
        return src
    read_adapter_config(src)
    for name in ADAPTER_WEIGHTS:
        if (src / name).is_file():
            return src / name
    raise AdapterError(f"{src} has {ADAPTER_CONFIG} but no {' or '.join(ADAPTER_WEIGHTS)}; save the "
                       "adapter again with PeftModel.save_pretrained")


def compile_patterns(patterns: Iterable[str] | str | None) -> list[re.Pattern[str]]:
    """The regular expressions selecting tensors (searched in each name)."""
    given = DEFAULT_PATTERNS if patterns is None else (patterns,) if isinstance(patterns, str) else tuple(patterns)
    if not given:
        raise InvalidArgumentError("patterns is empty: give at least one regular expression (or None "
                                   "for the LoRA and DoRA tensors)")
    compiled = []
    for pattern in given:
        if not isinstance(pattern, str):
            raise InvalidArgumentError(f"patterns must be strings (regular expressions), got {pattern!r}")
        try:
            compiled.append(re.compile(pattern))
        except re.error as exc:
            raise InvalidArgumentError(f"pattern {pattern!r} is not a regular expression: {exc}") from exc
    return compiled


def export_peft(src: str | os.PathLike[str], dest: str | os.PathLike[str], *,
                patterns: Sequence[str] | str | None = None, bf16_as: str = "f16",
                overwrite: bool = False) -> dict[str, str]:
    """Write the tensors of an adapter whose names match ``patterns`` into ``dest``.

    ``src``: an adapter folder (``adapter_config.json`` + ``adapter_model.safetensors``,
    as ``PeftModel.save_pretrained`` writes it) or a tensor file (``.safetensors``,
    ``.bin``, ``.pt``). ``patterns``: regular expressions searched in each tensor name
    (default: LoRA factors ``lora_A``/``lora_B``, ``lora_embedding_A/B`` and DoRA's
    ``lora_magnitude_vector``). ``dest``: a ``.nnef.tgz`` (or ``.tar``, or a folder),
    written atomically, holding one ``.dat`` per tensor named after it (``a.b.weight``
    → ``a.b.weight.dat``) and, from a folder, its ``adapter_config.json``. bf16 tensors
    are written as ``bf16_as`` (``f16`` or ``f32``). Returns ``{tensor name: file}``.
    """
    from t2n.ir.dtypes import DType, bf16_export_dtype
    from t2n.serialize.archive import open_writer
    from t2n.serialize.dat import dat_size, iter_dat
    from t2n.serialize.tensors import tensor_file_name
    from t2n.serialize.torch_io import open_checkpoint

    source_path = Path(src)
    if not source_path.exists():
        raise AdapterError(f"{source_path} does not exist: give an adapter folder or its adapter_model.safetensors")
    compiled = compile_patterns(patterns)
    out_bf16 = bf16_export_dtype(bf16_as)
    weights = adapter_weights(source_path)
    tensors = open_checkpoint(weights)
    names = [n for n in tensors if any(p.search(n) for p in compiled)]
    if not names:
        shown = ", ".join(list(tensors)[:5]) + (", ..." if len(tensors) > 5 else "")
        raise InvalidArgumentError(
            f"the patterns {[p.pattern for p in compiled]} match none of the {len(tensors)} tensors of "
            f"{weights} ({shown or 'none'}); nothing was written. What to do: change the regular "
            "expressions (each is searched in the tensor names above)")
    plan = []
    for name in names:
        data = tensors[name]
        dtype = out_bf16 if data.dtype is DType.BF16 else data.dtype
        plan.append((tensor_file_name(name), dat_size(data, dtype), iter_dat(data, dtype, regions=True, name=name)))
    config = source_path / ADAPTER_CONFIG if source_path.is_dir() else None
    with open_writer(Path(dest), overwrite=overwrite) as writer:
        for file, size, chunks in plan:
            writer.add_stream(file, size, chunks)
        if config is not None:
            text = config.read_bytes()
            writer.add_stream(ADAPTER_CONFIG, len(text), iter([text]))
    LOG.info("wrote %d adapter tensors of %s to %s", len(plan), weights, dest)
    return {name: file for name, (file, _, _) in zip(names, plan)}


def merge_adapter(model: torch.nn.Module, adapter_dir: str | os.PathLike[str]) -> torch.nn.Module:
    """``model`` with the LoRA/DoRA adapter of ``adapter_dir`` merged into its weights
    (``peft``'s ``merge_and_unload``); the model object given is changed. The adapter is
    checked against the model first, so a refused adapter leaves the model as it was."""
    folder = Path(adapter_dir)
    config = read_adapter_config(folder)
    kind = str(config.get("peft_type", "")).upper()
    if kind not in MERGEABLE:
        raise AdapterError(f"{folder / ADAPTER_CONFIG} is a {kind or 'untyped'} adapter; merge_peft merges "
                           "LoRA and DoRA adapters (peft_type LORA) only")
    weights = adapter_weights(folder)
    _check_fits(model, weights, folder)
    try:
        from peft import PeftModel
    except ImportError as exc:
        raise AdapterError("merging an adapter needs the peft package: pip install 't2n[llm]'") from exc
    LOG.info("merging the %s adapter of %s into the model", "DoRA" if config.get("use_dora") else "LoRA", folder)
    try:
        with warnings.catch_warnings():  # peft calls a transformers API deprecated in 5.x
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing", category=FutureWarning)
            wrapped = PeftModel.from_pretrained(model, str(folder), is_trainable=False)
        merged: torch.nn.Module = wrapped.merge_and_unload()  # the base model, its weights merged
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise AdapterError(f"peft cannot apply the adapter of {folder} to this model: {exc}; check that "
                           "the adapter was trained on this base model") from exc
    return merged.eval()


def _check_fits(model: torch.nn.Module, weights: Path, folder: Path) -> None:
    """Each adapter tensor belongs to a linear layer of ``model`` with matching sizes."""
    import torch

    from t2n.serialize.torch_io import open_checkpoint

    problems = []
    for name, data in open_checkpoint(weights).items():
        found = _FACTOR.match(name)
        if found is None:
            continue
        try:
            module = model.get_submodule(found["module"])
        except AttributeError:
            problems.append(f"{name} is for the module {found['module']!r}, which the model does not have")
            continue
        if not isinstance(module, torch.nn.Linear):
            continue  # embeddings and other layers: peft checks them
        want = _expected_shape(found["kind"], module, tuple(data.shape))
        if tuple(data.shape) != want:
            problems.append(f"{name} is {list(data.shape)} but {found['module']} "
                            f"({module.in_features} → {module.out_features}) needs {list(want)}")
    if problems:
        shown = "; ".join(problems[:4]) + (f"; and {len(problems) - 4} more" if len(problems) > 4 else "")
        raise AdapterError(f"the adapter in {folder} does not fit this model: {shown}. What to do: merge an "
                           "adapter trained on this base model (its config.json and layer sizes)")


def _expected_shape(kind: str, module: torch.nn.Linear, shape: tuple[int, ...]) -> tuple[int, ...]:
    rank = shape[0] if kind == "lora_A" else shape[-1]
    if kind == "lora_A":
        return (rank, module.in_features)
    if kind == "lora_B":
        return (module.out_features, rank)
    return (module.out_features,)
