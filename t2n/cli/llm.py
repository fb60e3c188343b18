"""``t2n llm``: export a local ``transformers`` checkpoint folder as an LLM artifact.
The flag names follow the widely used exporter's LLM command so its users can switch."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import TextIO

import click

from t2n.cli.main import debug_option, guarded

COMPRESSION_CHOICES = ["min_max_q4_0", "min_max_q4_0_with_embeddings", "min_max_q4_0_with_embeddings_99"]


@click.command("llm")
@click.option("--local-dir", "local_dir", required=True, type=click.Path(path_type=Path),
              help="Checkpoint folder: config.json and *.safetensors (tokenizer files optional). "
                   "Read from local files only.")
@click.option("-e", "--export-dirpath", "export_dirpath", required=True, type=click.Path(path_type=Path),
              help="Folder to write (new or empty): model/model.nnef.tgz, modes.json, tests/*.npz.")
@click.option("--force-module-dtype", type=click.Choice(["f32", "f16", "bf16"]), default=None,
              help="Cast the model to this dtype before export (bf16 is written as f16). "
                   "Default: the checkpoint's dtype.")
@click.option("-c", "--compression-method", type=click.Choice(COMPRESSION_CHOICES), default=None,
              help="Quantize the weights with this Q4_0 recipe (see t2n.quantize).")
@click.option("--force-f32-attention", is_flag=True, help="Compute attention in f32 (f16 models).")
@click.option("--force-f32-linear-accumulator", is_flag=True,
              help="Accumulate linear layers in f32 (f16 models).")
@click.option("--force-f32-normalization", is_flag=True, help="Compute normalizations in f32 (f16 models).")
@click.option("--reify-sdpa-operator", is_flag=True,
              help="Write attention as tract's tract_transformers_sdpa operator (tract 0.22 and newer).")
@click.option("--kv-cache", type=click.Choice(["explicit", "stateful", "stateful_int8", "stateful_int4"]),
              default="explicit", show_default=True,
              help="explicit: cache tensors as graph inputs/outputs; stateful: kept in tract's state "
                   "(tract_transformers_dyn_kv_cache, tract 0.23 and newer; only input_ids in); "
                   "stateful_int8/int4: kept quantized (tract_transformers_quantized_dyn_kv_cache, 0.23.5+).")
@click.option("--window-kv-cache", is_flag=True,
              help="With a stateful cache: sliding-window layers keep only their window "
                   "(tract_transformers_window_kv_sdpa); each call then takes one token.")
@click.option("--reify-rope-operator", is_flag=True,
              help="Write rotary embeddings as tract_transformers_apply_rope (tract 0.22 and newer).")
@click.option("--reify-rms-norm-operator", is_flag=True,
              help="Write RMS normalizations as tract_core_rms_norm (tract 0.23 and newer).")
@click.option("--num-logits-to-keep", type=click.IntRange(min=0), default=1, show_default=True,
              help="Return the logits of only the last N positions (0: every position).")
@click.option("--tract-version", default=None, help="The tract release to emit for (default: newest).")
@click.option("--tract-check-io-tolerance", default=None,
              help="Tolerance of the verification (exact, approximate, close, very, super, ultra).")
@click.option("-nv", "--no-verify", "no_verify", is_flag=True,
              help="Do not run the artifact in tract after export.")
@click.option("--dump-with-tokenizer-and-conf", is_flag=True,
              help="Write config.json and the checkpoint's tokenizer/ (processor/ for multimodal and audio "
                   "models) beside the graph: what `t2n generate` reads.")
@click.option("--naming-scheme", type=click.Choice(["raw", "natural_verbose", "natural_verbose_camel", "numeric"]),
              default="natural_verbose", show_default=True, help="How graph.nnef names its tensors.")
@click.option("--trust-remote-code", is_flag=True,
              help="Allow the checkpoint's own Python code (off by default: it runs code from the folder).")
@click.option("-mp", "--merge-peft", "merge_peft", type=click.Path(path_type=Path), default=None,
              help="A LoRA/DoRA adapter folder (adapter_config.json + adapter_model.safetensors, as peft "
                   "saves it) merged into the weights before export.")
@click.option("--force-inputs-dtype", type=click.Choice(["f32", "f16"]), default=None,
              help="The dtype of the cache inputs and of the outputs (cast inside the graph), e.g. f32 "
                   "for an f16 model. Default: the model's dtype.")
@click.option("--sample-generation-total-size", type=click.IntRange(min=6), default=None,
              help="Generate this many tokens (a 4-token prompt included) greedily in PyTorch and write "
                   "every step to tests/io.npz (default 6: a prefill and one decode step).")
@click.option("--image-size", "image_size", multiple=True, metavar="HxW",
              help="Vision-language models whose encoder is fixed to one image size (Qwen2.5-VL, Qwen3-VL): "
                   "write an encoder for images of H x W pixels; repeat for several sizes (default: one "
                   "encoder of the model's default size). Mistral 3's one encoder takes every size: it is "
                   "checked at these.")
@click.option("--copy-tied-weights/--no-copy-tied-weights", default=True, show_default=True,
              help="An output projection tied to the embedding reads a transposed copy of the matrix "
                   "(one more copy on disk), which tract packs once at load; without it tract packs the "
                   "matrix at every call (several times slower per token).")
@click.option("--progress/--no-progress", default=None,
              help="Log each stage on stderr (default: only when stderr is a terminal).")
@click.option("--overwrite", is_flag=True,
              help="Write into EXPORT_DIRPATH even if it is not empty (files of the same names are replaced).")
@debug_option
@guarded
def llm_command(local_dir: Path, export_dirpath: Path, force_module_dtype: str | None,
                compression_method: str | None, force_f32_attention: bool,
                force_f32_linear_accumulator: bool, force_f32_normalization: bool,
                reify_sdpa_operator: bool, kv_cache: str, reify_rope_operator: bool,
                reify_rms_norm_operator: bool, num_logits_to_keep: int | None, tract_version: str | None,
                tract_check_io_tolerance: str | None, no_verify: bool,
                dump_with_tokenizer_and_conf: bool, naming_scheme: str, trust_remote_code: bool,
                merge_peft: Path | None, force_inputs_dtype: str | None,
                sample_generation_total_size: int | None, progress: bool | None, window_kv_cache: bool,
                image_size: tuple[str, ...] = (), overwrite: bool = False, copy_tied_weights: bool = True) -> None:
    """Export the causal language model in LOCAL_DIR to tract with an explicit KV cache
    (inputs input_ids and in_cache_key/value_i; outputs outputs and out_cache_key/value_i).

    Writes EXPORT_DIRPATH/model/model.nnef.tgz, modes.json and tests/ (prefill.npz,
    decode.npz and io.npz, which `t2n check model.nnef.tgz --io tests/io.npz` replays).
    """
    from t2n.llm.common.options import LLMExportOptions
    from t2n.llm.entry import export_with_options

    show_progress(sys.stderr, progress)
    options = LLMExportOptions(
        dtype=force_module_dtype, compression=compression_method, force_f32_attention=force_f32_attention,
        force_f32_linear_accumulator=force_f32_linear_accumulator, force_f32_normalization=force_f32_normalization,
        num_logits_to_keep=num_logits_to_keep, tract_version=tract_version, verify=not no_verify,
        tract_check_io_tolerance=tract_check_io_tolerance, dump_with_tokenizer_and_conf=dump_with_tokenizer_and_conf,
        trust_remote_code=trust_remote_code, naming_scheme=naming_scheme, reify_sdpa_operator=reify_sdpa_operator,
        merge_peft=merge_peft, force_inputs_dtype=force_inputs_dtype,
        sample_generation_total_size=sample_generation_total_size, kv_cache=kv_cache, reify_rope=reify_rope_operator,
        reify_rms_norm=reify_rms_norm_operator, window_kv_cache=window_kv_cache, overwrite=overwrite,
        image_sizes=[_image_size(s) for s in image_size] or None, copy_tied_weights=copy_tied_weights)
    path = export_with_options(local_dir, export_dirpath, options)
    click.echo(f"wrote {path}")


def _image_size(text: str) -> tuple[int, int]:
    """``HxW`` (pixels) as (height, width)."""
    height, sep, width = text.lower().partition("x")
    if not (sep and height.strip().isdigit() and width.strip().isdigit()):
        raise click.BadParameter(f"{text!r} is not HxW (pixels, e.g. 448x672)", param_hint="--image-size")
    return int(height), int(width)


_PROGRESS = "t2n-llm-progress"


def show_progress(stream: TextIO, wanted: bool | None) -> bool:
    """Log the export's stages (loading, merging, tracing, checking, samples) on
    ``stream`` when ``wanted``, or by default when it is a terminal; returns whether."""
    on = wanted if wanted is not None else stream.isatty()
    if on:
        root = logging.getLogger("t2n")
        for old in [h for h in root.handlers if h.get_name() == _PROGRESS]:
            root.removeHandler(old)  # one progress handler, however many commands run
        handler = logging.StreamHandler(stream)
        handler.set_name(_PROGRESS)
        handler.setFormatter(logging.Formatter("t2n llm: %(message)s"))
        root.addHandler(handler)  # t2n.llm's records reach it
        logging.getLogger("t2n.llm").setLevel(logging.INFO)
    return on


@click.command("peft")
@click.argument("src", type=click.Path(path_type=Path))
@click.argument("dest", type=click.Path(path_type=Path))
@click.option("-p", "--pattern", "patterns", multiple=True, metavar="REGEX",
              help="Select the tensors whose name matches REGEX (searched in each name). Repeatable. "
                   "Default: LoRA's lora_A/lora_B (and lora_embedding_A/B) and DoRA's lora_magnitude_vector.")
@click.option("--bf16-as", type=click.Choice(["f16", "f32"]), default="f16", show_default=True,
              help="The type bf16 tensors are written as (NNEF has no bf16).")
@click.option("--overwrite", is_flag=True, help="Replace DEST even if t2n did not write it.")
@debug_option
@guarded
def peft_command(src: Path, dest: Path, patterns: tuple[str, ...], bf16_as: str, overwrite: bool) -> None:
    """Write only the tensors of the LoRA/DoRA adapter SRC (a peft adapter folder, or its
    adapter_model.safetensors / .bin / .pt file) into DEST (a .nnef.tgz, .tar or folder):
    one NNEF .dat file per tensor, named after it (a.b.lora_A.weight ->
    a.b.lora_A.weight.dat), and the folder's adapter_config.json. Nothing is written
    when SRC is not an adapter or no tensor matches."""
    from t2n.llm.common.peft import export_peft

    written = export_peft(src, dest, patterns=list(patterns) or None, bf16_as=bf16_as, overwrite=overwrite)
    click.echo(f"wrote {len(written)} adapter tensors to {dest}")
