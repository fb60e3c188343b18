"""``t2n llm``: export a local ``transformers`` checkpoint folder as an LLM artifact.
The flag names follow the widely used exporter's LLM command so its users can switch."""

from __future__ import annotations

import logging
from pathlib import Path

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
@click.option("--kv-cache", type=click.Choice(["explicit", "stateful"]), default="explicit", show_default=True,
              help="explicit: cache tensors as graph inputs/outputs; stateful: kept in tract's state "
                   "(tract_transformers_dyn_kv_cache, tract 0.23 and newer; only input_ids in).")
@click.option("--reify-rope-operator", is_flag=True,
              help="Write rotary embeddings as tract_transformers_apply_rope (tract 0.22 and newer).")
@click.option("--reify-rms-norm-operator", is_flag=True,
              help="Write RMS normalizations as tract_core_rms_norm (tract 0.23 and newer).")
@click.option("--num-logits-to-keep", type=click.IntRange(min=1), default=None,
              help="Return the logits of only the last N positions (default: all).")
@click.option("--tract-version", default=None, help="The tract release to emit for (default: newest).")
@click.option("--tract-check-io-tolerance", default=None,
              help="Tolerance of the verification (exact, approximate, close, very, super, ultra).")
@click.option("-nv", "--no-verify", "no_verify", is_flag=True,
              help="Do not run the artifact in tract after export.")
@click.option("--dump-with-tokenizer-and-conf", is_flag=True,
              help="Write config.json and tokenizer/ beside the graph.")
@click.option("--naming-scheme", type=click.Choice(["raw", "natural_verbose", "natural_verbose_camel", "numeric"]),
              default="natural_verbose", show_default=True, help="How graph.nnef names its tensors.")
@click.option("--trust-remote-code", is_flag=True,
              help="Allow the checkpoint's own Python code (off by default: it runs code from the folder).")
@debug_option
@guarded
def llm_command(local_dir: Path, export_dirpath: Path, force_module_dtype: str | None,
                compression_method: str | None, force_f32_attention: bool,
                force_f32_linear_accumulator: bool, force_f32_normalization: bool,
                reify_sdpa_operator: bool, kv_cache: str, reify_rope_operator: bool,
                reify_rms_norm_operator: bool, num_logits_to_keep: int | None, tract_version: str | None,
                tract_check_io_tolerance: str | None, no_verify: bool,
                dump_with_tokenizer_and_conf: bool, naming_scheme: str, trust_remote_code: bool) -> None:
    """Export the causal language model in LOCAL_DIR to tract with an explicit KV cache
    (inputs input_ids and in_cache_key/value_i; outputs outputs and out_cache_key/value_i)."""
    from t2n.llm.export import export_llm

    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("t2n.llm").setLevel(logging.INFO)
    path = export_llm(
        local_dir, export_dirpath, dtype=force_module_dtype, compression=compression_method,
        force_f32_attention=force_f32_attention, force_f32_linear_accumulator=force_f32_linear_accumulator,
        force_f32_normalization=force_f32_normalization, num_logits_to_keep=num_logits_to_keep,
        tract_version=tract_version, verify=not no_verify, tract_check_io_tolerance=tract_check_io_tolerance,
        dump_with_tokenizer_and_conf=dump_with_tokenizer_and_conf, trust_remote_code=trust_remote_code,
        naming_scheme=naming_scheme, reify_sdpa_operator=reify_sdpa_operator, kv_cache=kv_cache,
        reify_rope=reify_rope_operator, reify_rms_norm=reify_rms_norm_operator)
    click.echo(f"wrote {path}")
