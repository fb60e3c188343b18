"""The tensors of a checkpoint folder under the names (and in the layout) of the model
``transformers`` builds from it, without loading them.

``from_pretrained`` renames, fuses and splits a checkpoint's tensors as it loads them,
following the conversion mapping of the model's type or class
(``transformers.conversion_mapping``): per-expert ``experts.N.gate_proj``/``up_proj``
stacked into one ``experts.gate_up_proj``, ``embed_out`` renamed ``lm_head``, legacy
names (``LayerNorm.gamma``)... :func:`converted_tensors` applies that same mapping to
the lazily opened shards: names go through ``transformers``' own renaming function
(so they match the loaded model's exactly), and each conversion becomes tensor data
that makes its result as the artifact is written. Stacking, concatenating and chunking
(the conversions of every mixture-of-experts family) stream a few MB at a time
(:mod:`t2n.ir.tensor_views`); any other conversion runs ``transformers``' own operation
on that one group of tensors, in memory, when it is written.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from t2n.errors import CheckpointFolderError
from t2n.ir import DType, TensorData
from t2n.ir.tensor_views import AxisSliceData, ComputedData, JoinedData

if TYPE_CHECKING:
    import transformers

Values = dict[str, list[TensorData] | TensorData]


def _joined(values: list[TensorData] | TensorData, dim: int, stack: bool) -> TensorData:
    items = values if isinstance(values, list) else [values]
    if stack and not isinstance(values, list):
        return values  # already merged (transformers passes a tensor through)
    return JoinedData(items, dim, stack=stack)


def _single(values: list[TensorData] | TensorData) -> TensorData:
    return values[0] if isinstance(values, list) else values


def _merge(op: Any, values: Values, conv: Any, model: Any, layer: str) -> Values:
    size = len(values)
    return {op.get_target_pattern(size, pattern, conv.target_patterns): _joined(v, op.dim, True)
            for pattern, v in values.items()}


def _concatenate(op: Any, values: Values, conv: Any, model: Any, layer: str) -> Values:
    parts: list[TensorData] = []
    for pattern in conv.source_patterns:  # their order, as transformers keeps it
        if pattern in values:
            v = values[pattern]
            parts += v if isinstance(v, list) else [v]
    return {op.get_target_pattern(conv.target_patterns): JoinedData(parts, op.dim)}


def _chunk(op: Any, values: Values, conv: Any, model: Any, layer: str) -> Values:
    if len(values) != 1:
        raise ValueError("Chunk takes one tensor")
    source = _single(next(iter(values.values())))
    targets = op.get_target_patterns(conv.target_patterns, config=model.config)
    dim = op.dim % len(source.shape)
    size = source.shape[dim]
    step = math.ceil(size / len(targets))
    return {t: AxisSliceData(source, dim, i * step, min(size, (i + 1) * step))
            for i, t in enumerate(targets) if i * step < size}


def _streamed_ops() -> dict[type, Callable[[Any, Values, Any, Any, str], Values]]:
    from transformers.core_model_loading import Chunk, Concatenate, MergeModulelist

    return {MergeModulelist: _merge, Concatenate: _concatenate, Chunk: _chunk}


# -- any other conversion: transformers' own operations on the group, when written ----------


def _to_torch(data: TensorData, device: str = "cpu") -> torch.Tensor:
    from t2n.torch_data import IR_TO_TORCH

    dtype = IR_TO_TORCH[data.dtype]
    if device == "meta":
        return torch.empty(data.shape, dtype=dtype, device="meta")
    raw = np.ascontiguousarray(data.raw())
    if data.dtype is DType.BF16:
        return torch.from_numpy(raw.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(raw)


def _to_numpy(t: torch.Tensor) -> np.ndarray:
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


def _run_chain(conv: Any, collected: Mapping[str, Sequence[torch.Tensor]], layer: str, model: Any
               ) -> dict[str, torch.Tensor]:
    fresh = copy.deepcopy(conv)
    values: dict[str, Any] = {p: list(v) for p, v in collected.items()}
    for op in fresh.operations:
        values = op.convert(values, source_patterns=fresh.source_patterns, target_patterns=fresh.target_patterns,
                            full_layer_name=layer, model=model, config=model.config, missing_keys=None)
    return {k: v[0] if isinstance(v, list) else v for k, v in values.items()}


def _computed(conv: Any, collected: Mapping[str, list[TensorData]], layer: str, model: Any) -> Values:
    """The conversion's results as data computed by transformers' operations when read
    (their shapes from a run on meta tensors)."""
    from t2n.torch_data import TORCH_TO_IR

    shapes = _run_chain(conv, {p: [_to_torch(d, "meta") for d in v] for p, v in collected.items()}, layer, model)

    def compute(name: str) -> Callable[..., np.ndarray]:
        def fn(*arrays: np.ndarray) -> np.ndarray:
            tensors = [_to_torch(d) for v in collected.values() for d in v]
            it = iter(tensors)
            grouped = {p: [next(it) for _ in v] for p, v in collected.items()}
            return _to_numpy(_run_chain(conv, grouped, layer, model)[name])
        return fn

    sources = [d for v in collected.values() for d in v]
    return {name: ComputedData(sources, compute(name), tuple(t.shape), TORCH_TO_IR[t.dtype],
                               f"{type(conv).__name__} of {layer} → {name}")
            for name, t in shapes.items()}


def _convert(conv: Any, collected: dict[str, list[TensorData]], layer: str, model: Any) -> dict[str, TensorData]:
    """One converter's results under their full names (as ``WeightConverter.convert``
    names them: the first renamed key's prefix and suffix around each target pattern)."""
    streamed = _streamed_ops()
    if all(type(op) in streamed for op in conv.operations):
        values: Values = {p: list(v) for p, v in collected.items()}
        for op in conv.operations:
            values = streamed[type(op)](op, values, conv, model, layer)
    else:
        values = _computed(conv, collected, layer, model)
    full = layer.replace("*.", "0.") if "*." in layer else layer
    found = next((full.partition(k) for k in values if k in full), None)
    if found is None:
        return {k: _single(v) for k, v in values.items()}
    prefix, _, suffix = found
    return {prefix + k + suffix: _single(v) for k, v in values.items()}


def converted_tensors(model: transformers.PreTrainedModel, tensors: Mapping[str, TensorData],
                      folder: Path | None = None) -> dict[str, TensorData]:
    """``tensors`` (a checkpoint's, by its names) under the names of ``model`` (built from
    its config), converted as ``from_pretrained`` converts them on load. Names the
    mapping does not touch are kept; tensors the model does not hold keep their
    (renamed) names, for the caller to report."""
    from transformers.conversion_mapping import get_model_conversion_mapping
    from transformers.core_model_loading import (
        WeightConverter,
        WeightRenaming,
        dot_natural_key,
        rename_source_key,
    )

    mapping = get_model_conversion_mapping(model)
    renamings = [e for e in mapping if isinstance(e, WeightRenaming)]
    converters = [e for e in mapping if isinstance(e, WeightConverter)]
    by_pattern = {p: c for c in converters for p in c.source_patterns}
    meta = model.state_dict()
    prefix = getattr(model, "base_model_prefix", None)
    out: dict[str, TensorData] = {}
    groups: dict[str, tuple[Any, dict[str, list[TensorData]]]] = {}
    for key in sorted(tensors, key=dot_natural_key):
        renamed, pattern = rename_source_key(key, renamings, converters, prefix, meta)
        if renamed not in meta and key in meta:
            renamed, pattern = key, None
        if pattern is None:
            out.setdefault(renamed, tensors[key])
            continue
        converter, collected = groups.setdefault(renamed, (by_pattern[pattern], {}))
        collected.setdefault(pattern, []).append(tensors[key])
    for layer, (converter, collected) in groups.items():
        try:
            out.update(_convert(converter, collected, layer, model))
        except (ValueError, RuntimeError, KeyError, IndexError) as exc:
            where = f" in {folder}" if folder is not None else ""
            raise CheckpointFolderError(
                f"the tensors{where} that transformers converts into {layer} ({converter}) cannot be converted: "
                f"{exc}; check that the checkpoint matches its config.json") from exc
    return out


__all__ = ["converted_tensors"]
