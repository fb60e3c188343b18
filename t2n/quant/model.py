"""``t2n.quantize``: a model's weights quantized to Q4_0 in place, before export.

Each chosen weight is replaced, in its own memory, by its dequantized values
(``(q - 8) * d``), so the model stays an ordinary ``nn.Module`` (``state_dict``,
``.to()``, ``deepcopy``, pickling) and PyTorch's forward computes with exactly the
numbers tract will read: ``check()`` compares like with like. The block scales (f16,
one per 32 values: 1/64 of an f32 weight's size) are kept on the module that owns the
weight, in the attribute :data:`SCALES_ATTR` (``{parameter name: scales}``); the
compiler finds them there and writes the weight as Q4_0 blocks, deriving the codes
from the weight's memory chunk by chunk.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Iterator

import numpy as np
import torch

from t2n.errors import InvalidArgumentError
from t2n.ir import DType, TensorData
from t2n.quant.parallel import ordered_map
from t2n.quant.q4_0 import BLOCK, Q40Data, shape_problem
from t2n.quant.q4_0_kernel import SLAB_BLOCKS, f16, quantize_values_, values_of
from t2n.quant.recipes import Q40Recipe, recipe_of
from t2n.torch_data import tensor_data

logger = logging.getLogger("t2n.quant")

SCALES_ATTR = "t2n_q4_0_scales"
SLAB_VALUES = SLAB_BLOCKS * BLOCK
"""Values quantized at a time: bounded temporaries that stay in the CPU's cache."""


def selected_parameters(model: torch.nn.Module, recipe: Q40Recipe) -> Iterator[tuple[str, torch.nn.Parameter]]:
    kinds: tuple[type[torch.nn.Module], ...] = (torch.nn.Linear, torch.nn.Conv1d, torch.nn.Conv2d)
    if recipe.embeddings:
        kinds += (torch.nn.Embedding,)
    for path, module in model.named_modules(remove_duplicate=False):
        weight = module._parameters.get("weight") if isinstance(module, kinds) else None
        if weight is not None:
            yield (f"{path}.weight" if path else "weight"), weight


def _explicit(model: torch.nn.Module, names: Iterable[str]) -> list[tuple[str, torch.nn.Parameter]]:
    """The parameters named by the user, each checked before any is changed."""
    if isinstance(names, str):
        raise InvalidArgumentError(f"tensors must be a list of parameter names, not the string {names!r}")
    params = dict(model.named_parameters(remove_duplicate=False))
    out = []
    for name in names:
        p = params.get(name) if isinstance(name, str) else None
        if p is None:
            near = sorted(n for n in params if isinstance(name, str) and n.endswith(name.split(".")[-1]))[:5]
            raise InvalidArgumentError(
                f"tensors: the model has no parameter {name!r}" + (f" (similar: {near})" if near else ""))
        why = _problem(p) or _values_problem(p)
        if why is not None:
            raise InvalidArgumentError(f"tensors: parameter {name!r} cannot be stored as Q4_0: {why}; "
                                       f"leave it out of tensors=")
        out.append((name, p))
    return out


Q4_0_LIMIT = 8 * 65520.0
"""Magnitudes from which a block's scale (``max / -8``, an f16) is infinite."""


def _problem(p: torch.Tensor) -> str | None:
    if not p.is_floating_point() or p.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        return f"it holds {p.dtype}, not f32/f16/bf16"
    if p.is_meta:
        return "it is on the meta device (no values to quantize)"
    return shape_problem(tuple(p.shape))


def _values_problem(p: torch.Tensor) -> str | None:
    """Values Q4_0 cannot hold: quantizing them would turn their whole block into NaN."""
    if p.numel() == 0:
        return None
    lo, hi = torch.aminmax(p.detach())  # NaN carries through; no copy of the weight
    low, high = float(lo), float(hi)
    if not (math.isfinite(low) and math.isfinite(high)):
        return "it holds NaN or infinite values, which Q4_0 cannot store"
    if max(-low, high) >= Q4_0_LIMIT:
        return (f"it holds values beyond Q4_0's range (up to {max(-low, high):.4g}; a block's f16 scale "
                f"reaches only 8 × 65504)")
    return None


def _quantize_rows_(rows: torch.Tensor, percentile: float) -> np.ndarray:
    """Replace a slab of rows by its dequantized values; returns its f16 scales."""
    view = _host_view(rows)
    if view is None:  # bf16, other devices: through an f32 copy
        host = rows.detach().to("cpu", torch.float32, copy=True).numpy()
        scales = quantize_values_(host.reshape(-1, BLOCK), percentile)
        with torch.no_grad():
            rows.copy_(torch.from_numpy(host).to(rows.dtype))
        return scales
    if view.dtype == np.float32 and view.flags.c_contiguous:
        return quantize_values_(view.reshape(-1, BLOCK), percentile)  # in the weight's own memory
    host = values_of(np.ascontiguousarray(view).reshape(-1), DType.from_numpy(view.dtype)).reshape(-1, BLOCK)
    scales = quantize_values_(host, percentile)
    view[...] = f16(host.reshape(-1)).reshape(view.shape) if view.dtype == np.float16 else host.reshape(view.shape)
    return scales


def _host_view(t: torch.Tensor) -> np.ndarray | None:
    """A numpy view of a CPU f32/f16 tensor's memory (None for others: bf16, devices)."""
    if t.device.type != "cpu" or t.dtype not in (torch.float32, torch.float16):
        return None
    return t.detach().numpy()


def quantize_weight_(p: torch.Tensor, percentile: float = 1.0, *, threads: int | None = None) -> np.ndarray:
    """Quantize ``p`` in place (its values become the dequantized ones); returns the f16
    scales, one per block of 32 values of each row, in C order. Slabs of rows (in the
    CPU's cache) are spread over ``threads`` threads (default: one per CPU;
    :func:`t2n.quant.parallel.ordered_map`), each writing its own rows."""
    rows = max(1, SLAB_VALUES // max(1, math.prod(p.shape[1:])))
    starts = range(0, p.shape[0], rows)

    def slab(start: int) -> np.ndarray:
        with torch.no_grad():
            return _quantize_rows_(p[start:start + rows], percentile)

    scales = list(ordered_map(slab, starts, threads))
    torch.autograd.graph.increment_version(p)  # its values changed (writes through numpy)
    return np.concatenate(scales)


def _owners(model: torch.nn.Module, p: torch.Tensor) -> list[tuple[torch.nn.Module, str]]:
    return [(m, n) for m in model.modules() for n, q in m._parameters.items() if q is p]


def quantize(model: torch.nn.Module, recipe: str | Q40Recipe = "min_max_q4_0", *,
             tensors: Iterable[str] | None = None) -> torch.nn.Module:
    """Quantize ``model``'s weights to Q4_0 in place, as ``recipe`` says; returns ``model``.

    ``recipe``: ``"min_max_q4_0"`` (Linear, Conv1d and Conv2d weights), ``"min_max_q4_0_with_embeddings"``
    (and Embedding weights), ``"min_max_q4_0_with_embeddings_99"`` (0.99-quantile
    calibration) or a :class:`~t2n.quant.recipes.Q40Recipe`. A weight the recipe picks
    whose rows do not split into blocks of 32 stays in float (an INFO log line names
    it), as does one holding NaN, infinities or values beyond Q4_0's range (8 × 65504:
    the f16 scale of a block), with a WARNING line: Q4_0 would make its blocks NaN.
    ``tensors``: parameter names to quantize instead of the recipe's choice; one that
    cannot be Q4_0 (rank 1, rows not a multiple of 32, not float, such values) is
    refused with :class:`InvalidArgumentError` before anything is changed. A weight
    shared by several modules (tied embeddings) is quantized once. Compiling the model then writes
    these weights as Q4_0 blocks (tract only; see ``docs``).
    """
    if not isinstance(model, torch.nn.Module):
        raise InvalidArgumentError(f"quantize expects a torch.nn.Module, got {type(model).__name__}")
    chosen = recipe_of(recipe)
    picked = _explicit(model, tensors) if tensors is not None else list(selected_parameters(model, chosen))
    done: set[int] = set()
    for name, p in picked:
        if id(p) in done:
            continue
        done.add(id(p))
        why = _problem(p)
        if why is not None:
            logger.info("t2n.quantize(%s): %s stays in float: %s", chosen.name, name, why)
            continue
        why = _values_problem(p)
        if why is not None:
            logger.warning("t2n.quantize(%s): %s stays in float: %s", chosen.name, name, why)
            continue
        scales = quantize_weight_(p, chosen.percentile)
        for module, pname in _owners(model, p):
            table = dict(getattr(module, SCALES_ATTR, None) or {})
            table[pname] = scales
            setattr(module, SCALES_ATTR, table)
        logger.info("t2n.quantize(%s): %s %s → Q4_0", chosen.name, name, list(p.shape))
    return model


def q4_0_scales(root: torch.nn.Module) -> dict[int, np.ndarray]:
    """``id(parameter)`` → its Q4_0 scales, for every quantized weight under ``root``."""
    out: dict[int, np.ndarray] = {}
    for module in root.modules():
        table = getattr(module, SCALES_ATTR, None)
        if not isinstance(table, dict):
            continue
        for pname, scales in table.items():
            p = module._parameters.get(pname)
            if p is not None and isinstance(scales, np.ndarray):
                out[id(p)] = scales
    return out


def with_q4_0(scales: dict[int, np.ndarray], t: torch.Tensor, data: TensorData, name: str) -> TensorData:
    """``data`` (the IR data of model tensor ``t``) as a Q4_0 weight when ``t`` was
    quantized and its shape still fits its scales; else ``data`` unchanged."""
    s = scales.get(id(t))
    if s is None or shape_problem(data.shape) is not None or s.size * BLOCK != math.prod(data.shape):
        return data
    return Q40Data(data, s, name)


def quantized_state(model: torch.nn.Module) -> dict[str, torch.Tensor | TensorData]:
    """``model.state_dict()`` with its Q4_0 weights as Q4_0 tensor data, ready for
    ``t2n.export_tensors_to_nnef``."""
    scales = q4_0_scales(model)
    named = dict(model.named_parameters(remove_duplicate=False))
    out: dict[str, torch.Tensor | TensorData] = {}
    for name, t in model.state_dict(keep_vars=True).items():
        p = named.get(name)
        out[name] = with_q4_0(scales, p, tensor_data(p), name) if p is not None and id(p) in scales else t
    return out


def quantize_tensor(tensor: torch.Tensor, recipe: str | Q40Recipe = "min_max_q4_0", *,
                    name: str = "tensor") -> Q40Data:
    """A Q4_0 copy of ``tensor`` (which is not changed), for ``export_tensors_to_nnef``.
    A tensor that cannot be Q4_0 is refused with :class:`InvalidArgumentError` naming it."""
    chosen = recipe_of(recipe)
    if not isinstance(tensor, torch.Tensor):
        raise InvalidArgumentError(f"quantize_tensor: {name!r} is a {type(tensor).__name__}, not a tensor")
    why = _problem(tensor) or _values_problem(tensor)
    if why is not None:
        raise InvalidArgumentError(f"tensor {name!r} cannot be stored as Q4_0: {why}")
    copy = tensor.detach().to("cpu", copy=True).contiguous()
    scales = quantize_weight_(copy, chosen.percentile)
    return Q40Data(tensor_data(copy), scales, name)


__all__ = ["SCALES_ATTR", "q4_0_scales", "quantize", "quantize_tensor", "quantized_state", "with_q4_0"]
