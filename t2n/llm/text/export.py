"""``export_text``: a ``transformers`` causal LM (object or local folder) to a tract
artifact with its KV cache (explicit, or tract's state), plus ``modes.json`` and sample
inputs/outputs (what :func:`t2n.llm.export_llm` does for a text model).

If the export fails, what this call created is removed again."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import torch

from t2n.errors import InvalidArgumentError
from t2n.llm.common.checkpoint import check_architecture, config_of, copy_side_files, load_folder
from t2n.llm.common.io_dtype import with_inputs_dtype
from t2n.llm.common.kv_cache_forms import check_windows
from t2n.llm.common.options import LLMExportOptions
from t2n.llm.common.samples import write_samples
from t2n.llm.common.stateful import stateful_passes
from t2n.llm.common.streaming import (
    StreamedCheckpoint,
    kept_buffers,
    meta_model,
    quantize_streamed,
    reference_model,
)
from t2n.llm.common.verify import verify_against_transformers
from t2n.llm.decoder.modes import extension_lines, write_modes
from t2n.llm.decoder.moe import MoeExport
from t2n.llm.decoder.recurrent_state import check_hybrid_forms
from t2n.llm.decoder.wrapper import CacheLayout, KVCacheWrapper, cache_layout
from t2n.serialize.finite import NonFinite, report_nonfinite

if TYPE_CHECKING:
    import transformers

    from t2n.artifact import Artifact

LOG = logging.getLogger(__name__)

def _resolve_model(model_or_dir: transformers.PreTrainedModel | str | os.PathLike[str], opts: LLMExportOptions,
                   *, stream: bool = True) -> tuple[torch.nn.Module, Path | None, StreamedCheckpoint | None]:
    """The model to trace, its folder, and for a folder its shards: a folder's model is
    built on the meta device and its weights stream from the shards (see streaming);
    with ``stream=False`` (an adapter to merge into the weights) it is loaded whole."""
    dtype = opts.torch_dtype()
    if isinstance(model_or_dir, (str, os.PathLike)):
        folder = Path(model_or_dir)
        model, shards = meta_model(folder, dtype=dtype, trust_remote_code=opts.trust_remote_code)
        if not stream:
            return load_folder(folder, dtype=dtype, trust_remote_code=opts.trust_remote_code), folder, None
        return model, folder, shards
    if not isinstance(model_or_dir, torch.nn.Module) or not hasattr(model_or_dir, "config"):
        raise InvalidArgumentError(
            "model_or_dir must be a transformers causal LM (a PreTrainedModel) or the path of a "
            f"local checkpoint folder, got {type(model_or_dir).__name__}")
    given: torch.nn.Module = model_or_dir
    check_architecture([type(given).__name__], getattr(given.config, "model_type", None),
                       f"the model given ({type(given).__name__})")
    model = given.eval()
    if dtype is not None:
        model = model.to(dtype)
    return model, None, None


def export_text(model_or_dir: transformers.PreTrainedModel | str | os.PathLike[str], out: Path,
                 opts: LLMExportOptions) -> Path:
    """A text LLM: the model loaded (or, without an adapter to merge, built on the meta
    device and streamed from its folder), exported into ``out`` by :func:`_export`; an
    ``out`` this call created is removed again when it fails."""
    model, folder, shards = _resolve_model(model_or_dir, opts, stream=opts.merge_peft is None)
    if opts.merge_peft is not None:
        from t2n.llm.common.peft import merge_adapter

        model = merge_adapter(model, opts.merge_peft)
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    try:
        return _export(model, folder, out, shards, opts)
    except BaseException:
        if created:
            shutil.rmtree(out, ignore_errors=True)
        raise


def _export(model: torch.nn.Module, folder: Path | None, out: Path, shards: StreamedCheckpoint | None,
            opts: LLMExportOptions) -> Path:
    """``model`` exported into ``out``; a model on the meta device takes its weights from
    ``shards`` (its folder's, streamed), and is checked against the folder's model loaded
    whole when that fits in memory."""
    forms = opts.forms()
    config = config_of(model)
    model, moe = _weights_as_exported(model, opts.compression, shards)
    with moe.tracing(), kept_buffers(model):  # one real step, on the meta device for a folder
        layout = cache_layout(model)
    check_hybrid_forms(layout, forms)
    windows = check_windows(config) if forms.window else {}
    wrapper, layout = with_inputs_dtype(KVCacheWrapper(model, opts.kept_logits, layout).eval(), layout,
                                        opts.force_inputs_dtype)
    layout = attrs.evolve(layout, stateful=forms.stateful, kv_bits=forms.kv_bits, windows=tuple(sorted(windows.items())))
    embeddings: Any = model.get_input_embeddings()  # type: ignore[operator]
    vocab = int(embeddings.weight.shape[0])
    example_ids = torch.randint(0, vocab, (1, 3), generator=torch.Generator().manual_seed(1))
    path = out / "model" / "model.nnef.tgz"
    example = (example_ids, *layout.empty_cache(2, random=True))
    artifact = _write_artifact(wrapper, model, example, layout, path, opts, shards=shards, moe=moe,
                               windows=windows)
    loaded = None if shards is None or not opts.verify else _streamed_reference(
        shards, artifact, opts, q4_0_extra=moe.q4_0_weights())
    sampler = wrapper if shards is None else None if loaded is None else \
        with_inputs_dtype(loaded, cache_layout(loaded.model), opts.force_inputs_dtype)[0]
    if opts.verify and (shards is None or loaded is not None):
        verify_against_transformers(path, model if loaded is None else loaded.model, layout, vocab, opts.tolerance(),
                                    keep=opts.kept_logits, one_token=forms.window,
                                    note=artifact.nonfinite_weights_note())
    write_modes(layout, config, out, samples=sampler is not None)
    if sampler is not None:
        write_samples(sampler, layout, vocab, out, opts.sample_generation_total_size)
    if opts.dump_with_tokenizer_and_conf:
        copy_side_files(folder, model, out)
    return path


def _weights_as_exported(model: torch.nn.Module, compression: str | None,
                         shards: StreamedCheckpoint | None) -> tuple[torch.nn.Module, MoeExport]:
    """The model as it is traced: bf16 as f16 (what tract computes, so that PyTorch's reference
    outputs and samples are the artifact's), quantized when asked (from the shards when
    streamed, the experts' Q4_0 tensors too); with its experts' export plan."""
    from t2n.quant.model import quantize

    if next(model.parameters()).dtype == torch.bfloat16:
        LOG.info("bf16 weights are exported as f16")
        model = model.to(torch.float16)
    moe = MoeExport.of(model)
    if compression is not None:
        LOG.info("quantizing the weights with %s", compression)
        if shards is not None:
            quantize_streamed(model, shards, compression, moe.q4_0_weights())
        else:
            quantize(model, compression)
            if moe.q4_0_weights():
                quantize(model, compression, tensors=moe.q4_0_weights())
    return model, moe


def _write_artifact(wrapper: torch.nn.Module, model: torch.nn.Module, example: tuple[torch.Tensor, ...],
                    layout: CacheLayout, path: Path, opts: LLMExportOptions, *, shards: StreamedCheckpoint | None,
                    moe: MoeExport, windows: dict[int, int]) -> Artifact:
    """Trace ``wrapper`` on ``example`` and write ``path``: the explicit-cache graph, or with
    tract's stateful cache (interface passes run last in the pipeline); weights from the
    ``shards`` when streamed. Not checked here
    against the wrapper it traces: the caller checks the written artifact against
    transformers' own model."""
    from t2n.driver.export import export_model
    from t2n.options import compile_options, write_options

    forms = opts.forms()
    path.parent.mkdir(exist_ok=True)
    LOG.info("exporting %s (%d layers) to %s", type(model).__name__, layout.num_layers, path)
    weights = None
    if shards is not None:  # streamed: the weights come from the shards
        weights = shards.weights_inside(wrapper, model)
    options = compile_options(
        opts.target(), input_names=layout.input_names(), output_names=layout.output_names(),
        dynamic_axes=layout.dynamic_axes(), custom_extensions=extension_lines(config_of(model), layout.has_past()),
        nnef_variable_naming_scheme=opts.naming_scheme, extractors=moe.extractors, weights_from=weights,
        passes=[*forms.passes(), *(stateful_passes(layout.kv_pairs(), forms.kv_bits, windows) if forms.stateful else ())])
    with torch.no_grad(), moe.tracing():  # a stateful graph: the explicit one, its cache made tract's state
        return export_model(wrapper, example, write_options(path), options)


def nonfinite_parameters(model: torch.nn.Module) -> list[NonFinite]:
    """The parameters and buffers of a loaded model that hold NaN (parameters: or infinite)
    values."""
    from t2n.serialize.finite import nonfinite_tensors
    from t2n.torch_data import tensor_data

    named = {id(t): (n, t) for n, t in [*model.named_buffers(), *model.named_parameters()]
             if t.is_floating_point() and t.device.type == "cpu"}
    params = {n for n, t in named.values() if isinstance(t, torch.nn.Parameter)}
    return nonfinite_tensors(((n, tensor_data(t), tensor_data(t).dtype) for n, t in named.values()),
                             infinities=params.__contains__)


def _streamed_reference(shards: StreamedCheckpoint, artifact: Artifact, opts: LLMExportOptions, *,
                        q4_0_extra: list[str] | None = None) -> KVCacheWrapper | None:
    """For a streamed checkpoint being verified: the model loaded in PyTorch (if it fits
    the memory budget), wrapped as the traced module for the samples; ``None`` when it is
    not loaded (no check and no samples then). Non-finite weights are reported."""
    model = reference_model(shards, dtype=opts.torch_dtype(), trust_remote_code=opts.trust_remote_code,
                            compression=opts.compression, q4_0_extra=q4_0_extra or ())
    loaded = None if model is None else KVCacheWrapper(model, opts.kept_logits).eval()
    if loaded is None:
        return None
    found = nonfinite_parameters(loaded.model)
    if found:  # the streamed weights were not read at compile: named from the loaded model
        artifact.stats["nonfinite_weights"] = [str(f) for f in found]
        report_nonfinite(found, strict=False)
    return loaded
