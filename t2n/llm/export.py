"""``export_llm``: a ``transformers`` causal LM (object or local folder) to a tract
artifact with an explicit KV cache, plus ``modes.json`` and sample inputs/outputs.

Everything the call is given is checked before ``export_dirpath`` is created; if the
export then fails, what this call created is removed again."""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

from t2n.errors import InvalidArgumentError, OverwriteRefusedError
from t2n.llm.checkpoint import check_architecture, copy_side_files
from t2n.llm.streaming import StreamedCheckpoint, meta_model, quantize_streamed, reference_wrapper
from t2n.llm.wrapper import CacheLayout, KVCacheWrapper, cache_layout

LOG = logging.getLogger(__name__)

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
"""``dtype=`` names and the module dtype they give."""

COMPRESSIONS = ("min_max_q4_0", "min_max_q4_0_with_embeddings", "min_max_q4_0_with_embeddings_99")

MODES = {
    "pp": {"assert": "P == 0", "description": "prompt processing: the whole prompt, empty cache"},
    "tg": {"assert": "S == 1", "description": "token generation: one new token after P cached ones"},
}
"""The named modes written as ``tract_assert NAME: ...`` lines and in ``modes.json``."""

PROMPT_LENGTH = 4
"""Length of the sample prompt of ``tests/prefill.npz`` (then one decode step)."""


def _check_options(dtype: str | None, compression: str | None, num_logits_to_keep: int | None,
                   export_dirpath: Path, overwrite: bool) -> None:
    if dtype is not None and dtype not in DTYPES:
        raise InvalidArgumentError(f"dtype must be one of {', '.join(DTYPES)} (or None: the "
                                   f"checkpoint's own), got {dtype!r}")
    if compression is not None and compression not in COMPRESSIONS:
        raise InvalidArgumentError(f"compression must be one of {', '.join(COMPRESSIONS)} or None, "
                                   f"got {compression!r}")
    if num_logits_to_keep is not None and (isinstance(num_logits_to_keep, bool)
                                           or not isinstance(num_logits_to_keep, int)
                                           or num_logits_to_keep < 1):
        raise InvalidArgumentError(f"num_logits_to_keep must be a positive int (or None: every "
                                   f"position), got {num_logits_to_keep!r}")
    if export_dirpath.exists() and not overwrite and (
            not export_dirpath.is_dir() or any(export_dirpath.iterdir())):
        raise OverwriteRefusedError(f"{export_dirpath} already exists and is not an empty folder; "
                                    "choose a new export_dirpath or pass overwrite=True")


def _resolve_model(model_or_dir: Any, dtype: str | None, trust_remote_code: bool
                   ) -> tuple[torch.nn.Module, Path | None, StreamedCheckpoint | None]:
    """The model to trace, its folder, and for a folder its shards: a folder's model is
    built on the meta device and its weights stream from the shards (see streaming)."""
    if isinstance(model_or_dir, (str, os.PathLike)):
        folder = Path(model_or_dir)
        model, shards = meta_model(folder, dtype=DTYPES[dtype] if dtype else None,
                                   trust_remote_code=trust_remote_code)
        return model, folder, shards
    if not isinstance(model_or_dir, torch.nn.Module) or not hasattr(model_or_dir, "config"):
        raise InvalidArgumentError(
            "model_or_dir must be a transformers causal LM (a PreTrainedModel) or the path of a "
            f"local checkpoint folder, got {type(model_or_dir).__name__}")
    config = model_or_dir.config
    check_architecture([type(model_or_dir).__name__], getattr(config, "model_type", None),
                       f"the model given ({type(model_or_dir).__name__})")
    model = model_or_dir.eval()
    if dtype is not None:
        model = model.to(DTYPES[dtype])
    return model, None, None


def max_positions(config: Any) -> int | None:
    """How many positions the model embeds (``S + P`` must stay below it)."""
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def extension_lines(config: Any) -> list[str]:
    """The ``tract_assert`` lines: bounds of ``S`` and ``P`` and the named modes."""
    lines = ["tract_assert P >= 0", "tract_assert S >= 1"]
    limit = max_positions(config)
    if limit is not None:
        lines.append(f"tract_assert S + P < {limit}")
    lines += [f"tract_assert {name}: {mode['assert']}" for name, mode in MODES.items()]
    return lines


def _target(tract_version: str | None, force: dict[str, bool], tolerance: str | None) -> Any:
    from t2n.backends.target import TractNNEF

    options: dict[str, Any] = dict(force)
    if tolerance is not None:
        options["check_io_tolerance"] = tolerance
    return TractNNEF(tract_version, **options) if tract_version else TractNNEF(**options)


def _sample(wrapper: KVCacheWrapper, layout: CacheLayout, ids: torch.Tensor,
            past: list[torch.Tensor]) -> tuple[list[torch.Tensor], tuple[torch.Tensor, ...]]:
    with torch.no_grad():
        return [ids, *past], wrapper(ids, *past)


def _to_numpy(t: torch.Tensor) -> np.ndarray:
    t = t.detach()
    return (t.half() if t.dtype == torch.bfloat16 else t).numpy()  # bf16 is written as f16


def _save(path: Path, names_in: list[str], inputs: list[torch.Tensor], names_out: list[str],
          outputs: tuple[torch.Tensor, ...]) -> None:
    arrays: dict[str, Any] = {n: _to_numpy(t) for n, t in zip(names_in, inputs)}
    arrays.update({n: _to_numpy(t) for n, t in zip(names_out, outputs)})
    np.savez(path, **arrays)


def write_samples(wrapper: KVCacheWrapper, layout: CacheLayout, vocab: int, out: Path) -> None:
    """``tests/prefill.npz`` (``P == 0``) and ``tests/decode.npz`` (``S == 1``): the inputs
    under the graph's input names and PyTorch's outputs under its output names."""
    generator = torch.Generator().manual_seed(0)
    prompt = torch.randint(0, vocab, (1, PROMPT_LENGTH), generator=generator)
    inputs, outputs = _sample(wrapper, layout, prompt, layout.empty_cache(0))
    (out / "tests").mkdir(exist_ok=True)
    names_in, names_out = layout.input_names(), layout.output_names()
    _save(out / "tests" / "prefill.npz", names_in, inputs, names_out, outputs)
    token = outputs[0][:, -1:].argmax(-1)
    inputs, outputs = _sample(wrapper, layout, token, list(outputs[1:]))
    _save(out / "tests" / "decode.npz", names_in, inputs, names_out, outputs)


def _written_dtype(dtype: torch.dtype) -> str:
    return "float16" if dtype == torch.bfloat16 else str(dtype).removeprefix("torch.")


def write_modes(layout: CacheLayout, config: Any, out: Path, *, samples: bool = True) -> None:
    """``modes.json``: the symbols, the named modes and the cache layout a runtime needs."""
    description = {
        "format": "t2n-llm/1",
        "model": "model/model.nnef.tgz",
        "symbols": {"S": "tokens given in this call", "P": "tokens already in the cache"},
        "max_positions": max_positions(config),
        "modes": MODES,
        "inputs": layout.input_names(),
        "outputs": layout.output_names(),
        "cache": {"num_layers": layout.num_layers, "kv_heads": layout.kv_heads,
                  "head_dim": layout.head_dim, "dtype": _written_dtype(layout.dtype),
                  "shape": "[B, kv_heads, P, head_dim] in, [B, kv_heads, P + S, head_dim] out"},
        "tests": ["tests/prefill.npz", "tests/decode.npz"] if samples else [],
    }
    (out / "modes.json").write_text(json.dumps(description, indent=2) + "\n")


def export_llm(model_or_dir: Any, export_dirpath: str | os.PathLike[str], *, dtype: str | None = None,
               compression: str | None = None, force_f32_attention: bool = False,
               force_f32_linear_accumulator: bool = False, force_f32_normalization: bool = False,
               num_logits_to_keep: int | None = None, tract_version: str | None = None,
               verify: bool = True, tract_check_io_tolerance: str | None = None,
               dump_with_tokenizer_and_conf: bool = False, trust_remote_code: bool = False,
               naming_scheme: str = "natural_verbose", reify_sdpa_operator: bool = False,
               overwrite: bool = False) -> Path:
    """Export a causal LM to ``export_dirpath``; returns the path of the ``.nnef.tgz``.

    ``model_or_dir``: a ``transformers`` ``*ForCausalLM`` model or a local checkpoint
    folder (``config.json`` + ``*.safetensors``; read with local files only, remote code
    only with ``trust_remote_code=True``). ``dtype``: ``"f32"``, ``"f16"`` or ``"bf16"``
    (written as f16), ``None`` keeps the checkpoint's. ``compression``: a Q4_0 recipe of
    :func:`t2n.quantize` (applied to the loaded model; a model object given is changed).
    ``force_f32_*``: compute attention, linear accumulation or normalization in f32.
    ``num_logits_to_keep``: logits of only the last N positions. ``verify``: run the
    artifact in tract at the traced sizes and compare with PyTorch (``CheckMismatchError``).
    ``dump_with_tokenizer_and_conf``: ``config.json`` and ``tokenizer/`` beside the graph.
    ``naming_scheme``: how graph.nnef names tensors (``nnef_variable_naming_scheme``).
    ``reify_sdpa_operator``: attention as tract's ``tract_transformers_sdpa`` (0.22+).
    """
    from t2n.backends.nnef.naming import check_naming_scheme

    out = Path(export_dirpath)
    check_naming_scheme(naming_scheme)
    _check_options(dtype, compression, num_logits_to_keep, out, overwrite)
    model, folder, shards = _resolve_model(model_or_dir, dtype, trust_remote_code)
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    try:
        reference = None if shards is None else {
            "checkpoint": shards, "dtype": DTYPES[dtype] if dtype else None,
            "trust_remote_code": trust_remote_code}
        return _export(model, folder, out, reference, compression=compression,
                       num_logits_to_keep=num_logits_to_keep,
                       tract_version=tract_version, verify=verify, tolerance=tract_check_io_tolerance,
                       side_files=dump_with_tokenizer_and_conf, naming=naming_scheme, force={
                           "force_attention_inner_in_f32": force_f32_attention,
                           "force_linear_accumulation_in_f32": force_f32_linear_accumulator,
                           "force_norm_in_f32": force_f32_normalization,
                           "reify_sdpa_operator": reify_sdpa_operator})
    except BaseException:
        if created:
            shutil.rmtree(out, ignore_errors=True)
        raise


def _export(model: torch.nn.Module, folder: Path | None, out: Path, reference: dict[str, Any] | None, *,
            compression: str | None,
            num_logits_to_keep: int | None, tract_version: str | None, verify: bool,
            tolerance: str | None, side_files: bool, naming: str, force: dict[str, bool]) -> Path:
    from t2n.api import export
    from t2n.quant.model import quantize

    if next(model.parameters()).dtype == torch.bfloat16:
        # tract computes bf16 models in f16: trace the f16 model so that PyTorch's
        # reference outputs and samples are what the artifact computes.
        LOG.info("bf16 weights are exported as f16")
        model = model.to(torch.float16)
    if compression is not None:
        LOG.info("quantizing the weights with %s", compression)
        if reference is not None:
            quantize_streamed(model, reference["checkpoint"], compression)
        else:
            quantize(model, compression)
    layout = cache_layout(model)
    wrapper = KVCacheWrapper(model, num_logits_to_keep).eval()
    embeddings: Any = model.get_input_embeddings()  # type: ignore[operator]
    vocab = int(embeddings.weight.shape[0])
    example_ids = torch.randint(0, vocab, (1, 3), generator=torch.Generator().manual_seed(1))
    names = layout.input_names()
    axes = {"input_ids": {1: "S"}, **{n: {2: "P"} for n in names[1:]}}
    target = _target(tract_version, force, tolerance)
    (out / "model").mkdir(exist_ok=True)
    path = out / "model" / "model.nnef.tgz"
    LOG.info("exporting %s (%d layers) to %s", type(model).__name__, layout.num_layers, path)
    example = (example_ids, *layout.empty_cache(2, random=True))
    weights = None if reference is None else reference["checkpoint"].weights_for(model, "model.")
    with torch.no_grad():
        artifact = export(wrapper, example, path, target, input_names=names,
                          output_names=layout.output_names(), dynamic_axes=axes,
                          custom_extensions=extension_lines(model.config),
                          check_io=verify and reference is None, weights_from=weights,
                          nnef_variable_naming_scheme=naming)
    sampler: KVCacheWrapper | None = wrapper
    if reference is not None:  # streamed: PyTorch computes on the model loaded, if asked and it fits
        sampler = reference_wrapper(**reference, compression=compression,
                                    num_logits_to_keep=num_logits_to_keep) if verify else None
        if sampler is not None:
            with torch.no_grad():
                expected = sampler(*example)
            artifact.check(target.check_io_tolerance, inputs=[_to_numpy(t) for t in example],
                           expected=[_to_numpy(t) for t in expected])
    write_modes(layout, model.config, out, samples=sampler is not None)
    if sampler is not None:
        write_samples(sampler, layout, vocab, out)
    if side_files:
        copy_side_files(folder, model, out)
    return path
