"""Exporting a checkpoint folder without loading it: the model is built on the meta
device from ``config.json`` and every weight streams from the safetensors shards into
the artifact (``t2n.export(..., weights_from=...)``), so peak memory stays near one
chunk of one tensor, whatever the checkpoint's size.

What the artifact holds is what ``from_pretrained`` would have loaded:

* weights: read from the shards under the model's own names (a tied weight, such as
  ``lm_head.weight`` = ``embed_tokens.weight``, is one tensor, written once);
* buffers the shards do not hold (rotary ``inv_freq``, embedding scales...): computed by
  the model's own ``_init_weights``, as ``from_pretrained`` computes them. Each is
  computed twice from two different starting fills; one whose value depends on the fill
  was not computed and is refused by name (:class:`CheckpointFolderError`);
* the shards are checked against the model first: tensors missing, extra or of another
  shape are named with the expected and found shapes, before anything is written.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
import numpy as np
import torch

from t2n.errors import CheckpointFolderError, CorruptCheckpointError, CorruptTensorFileError
from t2n.ir import DType, TensorData

if TYPE_CHECKING:
    import transformers


LOG = logging.getLogger(__name__)

REFERENCE_MEMORY_FRACTION = 0.5
"""A checkpoint is loaded whole in PyTorch (for verification and the sample outputs)
only when its weights take at most this fraction of the memory available."""


@attrs.frozen
class StreamedCheckpoint:
    """The shards of a folder, opened lazily (no tensor data read yet)."""

    folder: Path
    tensors: Mapping[str, TensorData]
    nbytes: int
    """Bytes of the weights in the dtype the model computes in."""
    replaced: dict[str, TensorData] = attrs.field(factory=dict)
    """Shard tensor name → what is written instead (Q4_0 weights' dequantized values)."""
    converted: dict[str, TensorData] = attrs.field(factory=dict)
    """Shard tensor name → its data in the model's dtype, once made."""

    def weights_for(self, model: torch.nn.Module, prefix: str) -> dict[str, TensorData]:
        """Name → data under the names ``prefix + parameter name`` of every parameter and
        buffer of ``model`` held by the shards (tied tensors under each of their names),
        in the model's dtype (converted on every CPU as it is written)."""
        out: dict[str, TensorData] = {}
        owners: dict[str, torch.Tensor] = dict(model.named_parameters(remove_duplicate=False))
        owners.update(model.named_buffers(remove_duplicate=False))
        for aliases in _aliases(model).values():
            found = next((a for a in aliases if a in self.tensors), None)
            if found is not None:
                data = self.replaced.get(found) or self.converted.get(found) \
                    or _in_model_dtype(self.tensors[found], owners[aliases[0]])
                self.converted.setdefault(found, data)  # one object per tensor: tied ones written once
                out.update({prefix + a: data for a in aliases})
        return out

    def weights_inside(self, wrapper: torch.nn.Module, model: torch.nn.Module) -> dict[str, TensorData]:
        """:meth:`weights_for` ``model`` under the names it has inside ``wrapper`` (the
        module a graph is traced from)."""
        prefix = next(n for n, m in wrapper.named_modules() if m is model) + "."
        return self.weights_for(model, prefix)


def _in_model_dtype(data: TensorData, owner: torch.Tensor) -> TensorData:
    """A float shard tensor as the f32/f16 of the model tensor it fills (converted on the
    workers of :mod:`t2n.quant.parallel`); other data as it is."""
    from t2n.quant.parallel import ConvertedOnWorkers
    from t2n.torch_data import TORCH_TO_IR

    want = TORCH_TO_IR.get(owner.dtype)
    floats = (DType.F32, DType.F16, DType.BF16)
    if want in (DType.F32, DType.F16) and data.dtype in floats and data.dtype is not want:
        return ConvertedOnWorkers(data, want)
    return data


def open_shards(folder: Path) -> Mapping[str, TensorData]:
    """Every tensor of the folder's safetensors shards, lazily; a truncated shard, a
    corrupt header or an index naming a missing shard is refused by name."""
    from t2n.serialize.torch_io import open_checkpoint

    try:
        return open_checkpoint(folder)
    except CorruptTensorFileError as exc:
        raise CorruptCheckpointError(
            f"{exc}; the checkpoint in {folder} is damaged: download or save it again "
            "(model.save_pretrained(folder))") from exc
    except OSError as exc:
        raise CheckpointFolderError(f"the shards of {folder} cannot be read ({exc}); check the "
                                    "folder's permissions and that every shard is present") from exc


def meta_model(folder: Path, *, dtype: torch.dtype | None, trust_remote_code: bool
               ) -> tuple[torch.nn.Module, StreamedCheckpoint]:
    """The folder's causal LM with its weights on the meta device (buffers the shards do
    not hold are computed for real), and its shards, checked against each other."""
    from transformers import AutoModelForCausalLM

    from t2n.llm.common.checkpoint import check_folder

    check_folder(folder)

    def build(config: transformers.PretrainedConfig, chosen: torch.dtype) -> transformers.PreTrainedModel:
        model: transformers.PreTrainedModel = AutoModelForCausalLM.from_config(  # type: ignore[no-untyped-call]
            config, dtype=chosen, trust_remote_code=trust_remote_code)
        return model

    return meta_model_of(folder, build, dtype=dtype, trust_remote_code=trust_remote_code)


def meta_model_of(folder: Path,
                  build: Callable[[transformers.PretrainedConfig, torch.dtype], transformers.PreTrainedModel], *,
                  dtype: torch.dtype | None, trust_remote_code: bool) -> tuple[torch.nn.Module, StreamedCheckpoint]:
    """The model ``build(config, dtype)`` makes on the meta device from the folder's
    ``config.json`` (of the checked folder), and its shards converted as
    ``from_pretrained`` converts them, checked against the model, with the buffers they
    do not hold computed."""
    from transformers import AutoConfig

    from t2n.llm.common.checkpoint import config_error, config_errors, settle_device_constructors
    from t2n.llm.common.conversion import converted_tensors

    tensors = open_shards(folder)
    try:
        config = AutoConfig.from_pretrained(str(folder), local_files_only=True,
                                            trust_remote_code=trust_remote_code)
    except config_errors() as exc:
        raise config_error(folder, exc) from exc
    except (OSError, ValueError, KeyError) as exc:
        raise CheckpointFolderError(f"transformers cannot read {folder / 'config.json'}: {exc}; "
                                    "rewrite it with config.save_pretrained()") from exc
    chosen = dtype or _config_dtype(config, folder)
    settle_device_constructors()
    try:
        with torch.device("meta"):
            model: Any = build(config, chosen)
    except (ValueError, KeyError, AttributeError, RuntimeError) as exc:
        raise config_error(folder, exc) from exc
    except config_errors() as exc:
        raise config_error(folder, exc) from exc
    model.eval()
    tensors = converted_tensors(model, tensors, folder)  # as from_pretrained converts them
    check_agreement(model, tensors, folder)
    compute_missing_tensors(model, tensors, folder)
    nbytes = sum(math.prod(p.shape) * p.element_size() for p in _unique_parameters(model))
    return model, StreamedCheckpoint(folder, tensors, nbytes)


def _config_dtype(config: transformers.PretrainedConfig, folder: Path) -> torch.dtype:
    """The dtype ``from_pretrained(dtype="auto")`` would give (f32 when unnamed); a name
    that is no torch dtype is refused, naming the field."""
    value = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None)
    if isinstance(value, str):
        found = getattr(torch, value.removeprefix("torch."), None)
        if not isinstance(found, torch.dtype) or not found.is_floating_point:
            raise CheckpointFolderError(
                f"{folder / 'config.json'}: 'torch_dtype' (or 'dtype') is {value!r}, which is not a "
                "floating-point torch dtype (float32, float16, bfloat16); fix that field")
        value = found
    return value if isinstance(value, torch.dtype) else torch.float32


def _aliases(model: torch.nn.Module) -> dict[int, list[str]]:
    """id(tensor) → every dotted name of it (parameters, then persistent buffers)."""
    out: dict[int, list[str]] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        out.setdefault(id(p), []).append(name)
    persistent = set(model.state_dict(keep_vars=True))
    for name, b in model.named_buffers(remove_duplicate=False):
        if name in persistent:
            out.setdefault(id(b), []).append(name)
    return out


def _unique_parameters(model: torch.nn.Module) -> Iterator[torch.Tensor]:
    seen: set[int] = set()
    for p in model.parameters():
        if id(p) not in seen:
            seen.add(id(p))
            yield p


def _ignored(model: torch.nn.Module, attribute: str) -> list[re.Pattern[str]]:
    patterns = list(getattr(model, attribute, None) or ()) + [r"rotary_emb\.inv_freq"]
    return [re.compile(p) for p in patterns]


def check_agreement(model: torch.nn.Module, tensors: Mapping[str, TensorData], folder: Path) -> None:
    """Refuse shards that disagree with the model ``config.json`` describes, naming each
    tensor missing, extra or mis-shaped (expected vs found shape)."""
    aliases = _aliases(model)
    owners: dict[str, torch.Tensor] = {name: t for name, t in [*model.named_parameters(remove_duplicate=False),
                                       *model.named_buffers(remove_duplicate=False)]}
    missing, wrong, kinds = [], [], []
    computed = _ignored(model, "_keys_to_ignore_on_load_missing")
    for names in aliases.values():
        found = next((n for n in names if n in tensors), None)
        t = owners[names[0]]
        if found is None:
            if isinstance(t, torch.nn.Parameter) and not any(p.search(n) for p in computed for n in names):
                missing.append(names[0])
            continue
        if tuple(tensors[found].shape) != tuple(t.shape):
            wrong.append(f"{found}: expected shape {list(t.shape)} (from config.json), "
                         f"found {list(tensors[found].shape)}")
        elif tensors[found].dtype.is_float != t.is_floating_point():
            kinds.append(f"{found}: the shard holds {_torch_name(tensors[found].dtype)}, the model "
                         f"{str(t.dtype).removeprefix('torch.')}")
    known = {n for names in aliases.values() for n in names}
    ignore = _ignored(model, "_keys_to_ignore_on_load_unexpected")
    extra = sorted(n for n in tensors if n not in known and not any(p.search(n) for p in ignore))
    problems = [f"{len(v)} tensor(s) {what}: {_listed(v)}" for v, what in (
        (sorted(missing), "missing from the shards"),
        (extra, "in the shards but not in the model config.json describes"),
        (wrong, "of another shape than config.json says"),
        (kinds, "of another kind of dtype than the model's (integers or booleans for floats, or the "
                "other way round; t2n converts only between float dtypes)")) if v]
    if problems:
        raise CheckpointFolderError(
            f"the checkpoint in {folder} does not match its config.json: {'; '.join(problems)}; "
            "re-save the model with save_pretrained or fix config.json")


def _torch_name(dtype: DType) -> str:
    """A dtype as torch names it (``int64``, ``bfloat16``)."""
    from t2n.torch_data import TORCH_TO_IR

    found = next((t for t, d in TORCH_TO_IR.items() if d is dtype), None)
    return str(found).removeprefix("torch.") if found is not None else str(dtype)


def _listed(names: list[str]) -> str:
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def compute_missing_tensors(model: torch.nn.Module, tensors: Mapping[str, TensorData], folder: Path) -> None:
    """Give each meta buffer the shards do not hold, and each parameter the model says
    it computes when missing (``_keys_to_ignore_on_load_missing``: Marian's sinusoidal
    position tables), its value computed by the model's ``_init_weights`` (as
    ``from_pretrained`` does); one that it does not compute is refused by name, since its
    value in the real model is unknown."""
    held = {n for names in _aliases(model).values() for n in names if n in tensors}
    computed = _ignored(model, "_keys_to_ignore_on_load_missing")
    owners: list[tuple[torch.nn.Module, str, str]] = []
    for path, module in model.named_modules():
        for name, t in [*module._buffers.items(), *module._parameters.items()]:
            full = f"{path}.{name}" if path else name
            if t is None or not t.is_meta or full in held:
                continue
            if name in module._buffers or any(p.search(full) for p in computed):
                owners.append((module, name, full))
    if not owners:
        return
    runs = [_computed(model, owners, fill) for fill in (0, 1)]
    unknown = [full for (_, _, full), a, b in zip(owners, *runs) if not torch.equal(a, b)]
    if unknown:
        raise CheckpointFolderError(
            f"the model config.json describes has buffer(s) that neither the shards of {folder} "
            f"hold nor its code computes: {_listed(unknown)}; export the loaded model instead "
            "(t2n.llm.export_llm(AutoModelForCausalLM.from_pretrained(folder), ...))")


def _owners_then_ancestors(model: torch.nn.Module, modules: list[torch.nn.Module]) -> list[torch.nn.Module]:
    """``modules``, then the modules that contain them, deepest first: some models
    compute a layer's buffer in their model's ``_init_weights`` (Falcon-H1's MuP vector)."""
    paths = {id(m): path for path, m in model.named_modules()}
    by_path = dict(model.named_modules())
    wanted = [paths[id(m)] for m in modules if id(m) in paths]
    ancestors = {".".join(path.split(".")[:i]) for path in wanted for i in range(len(path.split(".")))}
    order = list(dict.fromkeys(wanted)) + sorted(ancestors - set(wanted), key=lambda p: -len(p.split(".")) if p else 0)
    return [by_path[p] for p in order]


def _init_weights_of(model: torch.nn.Module, path: str) -> object:
    """The ``_init_weights`` ``from_pretrained`` runs on the module at ``path``: that of the innermost
    pretrained model holding it (a composite model's vision tower is one, with its own:
    SigLIP's ``position_ids`` in Gemma 3), else the model's."""
    from transformers import PreTrainedModel

    parts = path.split(".") if path else []
    for i in range(len(parts), 0, -1):
        holder = model.get_submodule(".".join(parts[:i]))
        if isinstance(holder, PreTrainedModel):
            return getattr(holder, "_init_weights", None)
    return getattr(model, "_init_weights", None)


def _computed(model: torch.nn.Module, owners: list[tuple[torch.nn.Module, str, str]], fill: int) -> list[torch.Tensor]:
    """Each buffer (or parameter) after ``_init_weights`` ran on its module, starting from ``fill``."""
    for module, name, _ in owners:
        if name in module._parameters:
            p = module._parameters[name]
            assert p is not None
            module._parameters[name] = torch.nn.Parameter(torch.full(p.shape, fill, dtype=p.dtype),
                                                          requires_grad=False)
            continue
        b = module._buffers[name]
        assert b is not None
        module._buffers[name] = torch.full(b.shape, fill, dtype=b.dtype)
    paths = {id(m): p for p, m in model.named_modules()}
    with torch.no_grad():
        for module in _owners_then_ancestors(model, [m for m, _, _ in owners]):
            init = _init_weights_of(model, paths.get(id(module), ""))
            if callable(init):
                init(module)
    out = []
    for module, name, _ in owners:
        t = module._parameters[name] if name in module._parameters else module._buffers[name]
        assert t is not None
        out.append(t.detach().clone())
    return out


@contextlib.contextmanager
def kept_buffers(model: torch.nn.Module) -> Iterator[None]:
    """Every buffer of ``model`` as it is now, put back afterwards: a forward pass on the
    meta device must not replace a computed buffer by a meta copy (GPT-J moves its
    rotary table to the device of the positions it is given)."""
    saved = [(m, n, b) for m in model.modules() for n, b in m._buffers.items()]
    try:
        yield
    finally:
        for module, name, buffer in saved:
            if module._buffers.get(name) is not buffer:
                module._buffers[name] = buffer


def quantize_streamed(model: torch.nn.Module, checkpoint: StreamedCheckpoint, recipe: str,
                      extra: Sequence[str] = ()) -> None:
    """Mark the weights ``recipe`` picks (and the parameters named in ``extra``) as Q4_0:
    their scales and blocks are computed while each streams from the shards into the
    archive (never in memory whole; one pass over the shard, on every CPU:
    :class:`~t2n.quant.q4_0.QuantizedOnRead`), the same bytes as after
    :func:`t2n.quantize` on the loaded model."""
    from t2n.quant.model import SCALES_ATTR, selected_parameters
    from t2n.quant.q4_0 import QuantizedOnRead, shape_problem
    from t2n.quant.recipes import recipe_of
    from t2n.torch_data import ir_dtype

    chosen = recipe_of(recipe)
    done: dict[int, np.ndarray] = {}
    named = dict(model.named_parameters(remove_duplicate=False))
    for name, p in [*selected_parameters(model, chosen), *((n, named[n]) for n in extra)]:
        found = next((a for a in _aliases(model).get(id(p), []) if a in checkpoint.tensors), None)
        dtype = ir_dtype(p.dtype)
        if found is None or shape_problem(tuple(p.shape)) is not None or dtype not in (DType.F32, DType.F16):
            continue
        if id(p) not in done:
            data = QuantizedOnRead(_in_dtype(checkpoint.tensors[found], dtype), chosen.percentile, found)
            done[id(p)] = data.scales
            checkpoint.replaced[found] = data
        path, _, pname = name.rpartition(".")
        module = model.get_submodule(path)
        table = dict(getattr(module, SCALES_ATTR, None) or {})
        table[pname] = done[id(p)]
        setattr(module, SCALES_ATTR, table)
    LOG.info("%s: %d weights as Q4_0 (scales streamed from the shards)", chosen.name, len(done))


M = TypeVar("M", bound=torch.nn.Module)


def quantized(model: M, compression: str | None, shards: StreamedCheckpoint | None = None) -> M:
    """``model`` with the weights the recipe ``compression`` picks marked Q4_0 (in place;
    computed from ``shards`` as they stream for a model on the meta device; None: as it is)."""
    if compression is None:
        return model
    from t2n.quant.model import quantize

    LOG.info("quantizing the weights with %s", compression)
    if shards is not None:
        quantize_streamed(model, shards, compression)
    else:
        quantize(model, compression)
    return model


def _in_dtype(data: TensorData, dtype: DType) -> TensorData:
    from t2n.ir.tensor_data import converted

    return converted(data, dtype)


def __getattr__(name: str) -> Any:
    """``DequantizedData``: the former name of :class:`t2n.quant.q4_0.QuantizedOnRead`."""
    if name == "DequantizedData":
        from t2n.quant.q4_0 import QuantizedOnRead

        return QuantizedOnRead
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def available_memory() -> int:
    """Bytes of memory available now (``MemAvailable`` of ``/proc/meminfo``, else the
    free physical pages)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass  # not Linux: the free pages below
    return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))


def fits_in_memory(checkpoint: StreamedCheckpoint) -> bool:
    """Whether loading the whole model in PyTorch stays within the memory budget."""
    return checkpoint.nbytes <= REFERENCE_MEMORY_FRACTION * available_memory()



def reference_model(checkpoint: StreamedCheckpoint, *, dtype: torch.dtype | None, trust_remote_code: bool,
                    compression: str | None, q4_0_extra: Sequence[str] = ()) -> torch.nn.Module | None:
    """The checkpoint loaded whole in PyTorch (cast and quantized as the export was),
    the reference for verification and the sample outputs. ``None``, with a warning saying what is skipped, when it does not fit.
    (Without verification a folder is never loaded: no samples are written then.)"""
    from t2n.llm.common.checkpoint import load_folder
    from t2n.quant.model import quantize

    if not fits_in_memory(checkpoint):
        LOG.warning(
            "the weights of %s take %.1f GB, more than %d%% of the memory available: the model "
            "is not loaded in PyTorch, so the artifact is not verified against it and no "
            "tests/*.npz samples are written (run it with tract_greedy_generate or Artifact.check "
            "on a machine with more memory to check it)", checkpoint.folder, checkpoint.nbytes / 1e9,
            round(100 * REFERENCE_MEMORY_FRACTION))
        return None
    model = load_folder(checkpoint.folder, dtype=dtype, trust_remote_code=trust_remote_code)
    if next(model.parameters()).dtype == torch.bfloat16:
        model = model.to(torch.float16)
    if compression is not None:
        quantize(model, compression)
        if q4_0_extra:
            quantize(model, compression, tensors=q4_0_extra)
    return model
