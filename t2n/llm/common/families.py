"""What ``t2n.llm`` does with each causal-LM family of ``transformers``: proven (its export
generates transformers' tokens) or refused, with the reason.

:data:`FAMILIES` covers every model type of ``MODEL_FOR_CAUSAL_LM_MAPPING`` in the
transformers releases t2n declares, the pinned one and the newest (a test checks it on both). A family is *proven* when a tiny random model of it,
exported and run in tract, generates the 16 tokens ``generate(do_sample=False)`` does:
in the tests (the note names them) or in the sweep of ``python -m tools.llm_families
sweep`` (its outcomes are in ``tools/llm_families_sweep.json``). Every other family is
*refused*: :func:`refusal` gives the reason, which ``export_llm`` raises as
:class:`~t2n.errors.UnsupportedArchitectureError` before anything is written. The
family table of ``docs/llm.md`` is written from this module by ``python -m
tools.llm_families doc``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import attrs

PROVEN = "proven"
REFUSED = "refused"


@attrs.frozen
class Family:
    """One causal-LM model type: ``status`` (:data:`PROVEN` or :data:`REFUSED`) and a
    note: how it is proven, or why it is refused and what to do."""

    model_type: str
    status: str = attrs.field(validator=attrs.validators.in_((PROVEN, REFUSED)))
    note: str


def _proven(model_type: str, note: str) -> Family:
    return Family(model_type, PROVEN, note)


def _refused(model_type: str, note: str) -> Family:
    return Family(model_type, REFUSED, note)


SWEEP = "sweep: a tiny model in f32 from its configuration's defaults"
"""Note of a family proven by the sweep only."""

NOT_DECODER = ("not a decoder-only language model (an encoder used as a decoder, an "
               "encoder-decoder or a speech/vision model's decoder): export it with t2n.export")

_ROWS: tuple[Family, ...] = (
    _proven('afmoe', "tests: sliding layers (generating beyond a 4-token window) and a global one, sigmoid router with expert bias, experts beside shared ones; f32, explicit and stateful cache (tests/llm/test_families_added.py; the sweep's tiny model has zero routers, whose ties tract and PyTorch break differently)"),
    _proven('apertus', SWEEP),
    _proven('apertus1p5_text', SWEEP),
    _proven('arcee', SWEEP),
    _proven('aria_text', SWEEP),
    _refused('axk1', "its export fails (RuntimeError: shape '[-1, 8, 0]' is invalid for input of size 4)"),
    _refused('axk2', 'its attention keeps an indexer or compression cache beside the keys and values, which the exported cache does not hold yet'),
    _refused('bailing_hybrid', "not proven: the tiny model the sweep builds from its configuration's defaults has only recurrent layers, on which transformers' cache cannot count the tokens seen (its hybrids with attention layers may export: the proven ones are listed here)"),
    _proven('bamba', 'tests: attention beside Mamba-2 mixers, their states as cache inputs/outputs; f32, f16 streamed folder'),
    _refused('bart', 'tract generates other tokens than transformers from token 16 of 16 on a tiny random model: not exported until this is found'),
    _proven('beam', SWEEP),
    _refused('bert', 'its output holds no key/value cache (a recurrent or encoder model): export it with t2n.export'),
    _refused('bert-generation', 'its output holds no key/value cache (a recurrent or encoder model): export it with t2n.export'),
    _refused('big_bird', 'its output holds no key/value cache (a recurrent or encoder model): export it with t2n.export'),
    _proven('bigbird_pegasus', SWEEP),
    _proven('biogpt', SWEEP),
    _proven('bitnet', SWEEP),
    _refused('blenderbot', 'its export fails (IndexError: list index out of range)'),
    _refused('blenderbot-small', 'tract generates other tokens than transformers from token 16 of 16 on a tiny random model: not exported until this is found'),
    _proven('bloom', SWEEP),
    _refused('blt', "its export fails (AttributeError: 'BltConfig' object has no attribute 'num_hidden_layers')"),
    _refused('camembert', 'its output holds no key/value cache (a recurrent or encoder model): export it with t2n.export'),
    _proven('codegen', SWEEP),
    _proven('cohere', SWEEP),
    _proven('cohere2', SWEEP),
    _proven('cohere2_moe', SWEEP),
    _proven('cohere_compass_text', 'tests: rotary over three equal position axes on text, a theta per layer type; f32, explicit and stateful cache (tests/llm/test_families_added.py)'),
    _refused('cpmant', 'its export fails (RuntimeError: The size of tensor a (36) must match the size of tensor b (33) at non-singleton dimension 3)'),
    _proven('ctrl', SWEEP),
    _proven('cwm', SWEEP),
    _refused('data2vec-text', 'its output holds no key/value cache (a recurrent or encoder model): export it with t2n.export'),
    _refused('dbrx', "its experts (DbrxExperts: a loop over the experts chosen, aten::nonzero) are not transformers' experts interface that t2n exports as one op; transformers 5.23 also needs attn_config.rope_theta and clip_qkv to build it"),
    _refused('deepseek_v2', 'its complex-valued rotary embedding (aten::polar) has no lowering yet'),
    _proven('deepseek_v3', 'tests: latent attention; grouped router and experts in standard operations; f32, streamed folder'),
    _refused('deepseek_v32', 'its attention keeps an indexer or compression cache beside the keys and values, which the exported cache does not hold yet'),
    _refused('deepseek_v4', 'its attention keeps an indexer or compression cache beside the keys and values, which the exported cache does not hold yet'),
    _proven('diffllama', SWEEP),
    _proven('doge', SWEEP),
    _refused('dory', 'its export fails (TraceError: torch.jit.trace failed on the model: RuntimeError: The size of tensor a (8) must match the size of tensor b (5) at non-singleton dimension 3)'),
    _proven('dots1', 'tests: a dense layer, then routed experts beside a shared one; f32, explicit and stateful cache (tests/llm/test_families_added.py)'),
    _refused('dots3_note', "not proven: the sweep could not build a tiny model from its configuration's defaults (ValueError: `per_layer_config` keys must be integer layer indices in the range [0, 2); got [2, 3, 4, 6, 7, 8, 10, 11, 12, 14, 15, 16, 18, 19, 20, 22, 23, 24, 26)"),
    _refused('dots3_note_text', 'its attention keeps an indexer or compression cache beside the keys and values, which the exported cache does not hold yet'),
    _refused('electra', 'its output holds no key/value cache (a recurrent or encoder model): export it with t2n.export'),
    _proven('emu3', SWEEP),
    _refused('ergo', "its export fails (UnsupportedOpsError: 3 op use(s) cannot be exported; nothing was written: - aten::histc in module 'model.model.layers.1.mlp.experts' (transformers/integrations/moe.py(449): grouped_mm_experts_forward))"),
    _refused('ernie', 'its output holds no key/value cache (a recurrent or encoder model): export it with t2n.export'),
    _proven('ernie4_5', SWEEP),
    _proven('ernie4_5_moe', SWEEP),
    _proven('exaone', SWEEP),
    _proven('exaone4', SWEEP),
    _proven('exaone_moe', SWEEP),
    _proven('falcon', SWEEP),
    _proven('falcon_h1', 'tests: attention beside Mamba-2 mixers, their states as cache inputs/outputs; f32, f16 streamed folder'),
    _proven('falcon_mamba', 'tests: conv and state-space states as cache inputs/outputs; f32, f16 streamed folder'),
    _proven('flex_olmo', SWEEP),
    _proven('flint', SWEEP),
    _proven('fuyu', SWEEP),
    _proven('gemma', SWEEP),
    _proven('gemma2', 'tests: f32, sliding window'),
    _proven('gemma3', SWEEP),
    _proven('gemma3_text', 'tests: f32, sliding window, streamed folder'),
    _refused('gemma3n', "not proven: the sweep could not build a tiny model from its configuration's defaults (ImportError: TimmWrapperModel requires the PIL library but it was not found in your environment. You can install it with pip: `pip install pillow`. Please note )"),
    _refused('gemma3n_text', 'its export fails: its activation sparsity computes a Gaussian quantile (aten::erfinv, no lowering), and without it tract refuses the per-layer input gate (an EinSum of mismatched ranks)'),
    _refused('gemma4', "not proven: the sweep could not build a tiny model from its configuration's defaults (ValueError: `per_layer_config` keys must be integer layer indices in the range [0, 2); got [5, 11, 17, 23, 29].)"),
    _refused('gemma4_assistant', "not proven: the sweep could not build a tiny model from its configuration's defaults (StrictDataclassClassValidationError: Class validation error for validator 'validate_architecture': ValueError: hidden_size_per_layer_input must be 0, got 256)"),
    _refused('gemma4_text', 'its full-attention layers have another head size (global_head_dim) than its sliding ones: the exported cache has one key/value shape for all layers'),
    _refused('gemma4_unified', "not proven: the sweep could not build a tiny model from its configuration's defaults (ValueError: `per_layer_config` keys must be integer layer indices in the range [0, 2); got [5, 11, 17, 23, 29].)"),
    _refused('gemma4_unified_assistant', "not proven: the sweep could not build a tiny model from its configuration's defaults (ValueError: `per_layer_config` keys must be integer layer indices in the range [0, 2); got [5, 11, 17, 23, 29].)"),
    _refused('gemma4_unified_text', 'its full-attention layers have another head size (global_head_dim) than its sliding ones: the exported cache has one key/value shape for all layers'),
    _refused('git', "not proven: the sweep's export did not finish (the process died)"),
    _proven('glm', SWEEP),
    _proven('glm4', SWEEP),
    _proven('glm4_moe', SWEEP),
    _proven('glm4_moe_lite', SWEEP),
    _refused('glm_moe_dsa', 'its attention keeps an indexer or compression cache beside the keys and values, which the exported cache does not hold yet'),
    _proven('got_ocr2', SWEEP),
    _proven('gpt-sw3', SWEEP),
    _proven('gpt2', 'tests: f32, stateful cache, reified SDPA, streamed folder'),
    _proven('gpt_bigcode', SWEEP),
    _proven('gpt_neo', SWEEP),
    _proven('gpt_neox', 'tests: f32, streamed folder (`embed_out` read as `lm_head`)'),
    _proven('gpt_neox_japanese', SWEEP),
    _proven('gpt_oss', 'tests: `tract_moe_ffn` with router and expert biases, interleaved clamped SwiGLU; attention sinks, sliding layers; f32, f16, streamed folder (f32, f16)'),
    _proven('gptj', 'tests: streamed folder (partial rotary, parallel residual; rotary table computed); sweep: f32'),
    _proven('granite', SWEEP),
    _proven('granite_swa', SWEEP),
    _proven('granitemoe', 'tests: `tract_moe_ffn`; f32, streamed folder'),
    _proven('granitemoe_swa', SWEEP),
    _proven('granitemoehybrid', 'tests: attention beside Mamba-2 mixers, their states as cache inputs/outputs, experts as `tract_moe_ffn` beside a shared MLP; f32, f16 streamed folder'),
    _proven('granitemoeshared', SWEEP),
    _proven('helium', SWEEP),
    _proven('hrm_text', SWEEP),
    _proven('hunyuan_v1_dense', SWEEP),
    _proven('hunyuan_v1_moe', SWEEP),
    _proven('hy_v3', SWEEP),
    _refused('hy_v4', 'its attention keeps an indexer or compression cache beside the keys and values, which the exported cache does not hold yet'),
    _proven('hyperclovax', SWEEP),
    _refused('inkling2_loop_text', 'it keeps a recurrent state (state-space, linear-attention or xLSTM layers) that the exported cache does not hold yet: export it with t2n.export'),
    _refused('inkling2_text', 'it keeps a recurrent state (state-space, linear-attention or xLSTM layers) that the exported cache does not hold yet: export it with t2n.export'),
    _refused('inkling_text', 'it keeps a recurrent state (state-space, linear-attention or xLSTM layers) that the exported cache does not hold yet: export it with t2n.export'),
    _proven('internlm3', SWEEP),
    _proven('iquestcoder', SWEEP),
    _proven('jais2', SWEEP),
    _proven('jamba', 'tests: attention beside Mamba layers, their states as cache inputs/outputs; f32, f16 streamed folder (also with an f32 interface); with experts as `tract_moe_ffn` (f32)'),
    _proven('jetmoe', SWEEP),
    _refused('kimi_linear', "its delta attention (KimiLinearDeltaAttention) decays per channel; t2n's gated delta rule decays per head"),
    _proven('kolibri1', SWEEP),
    _refused('kolibri1_1', "not proven: the sweep could not build a tiny model from its configuration's defaults (StrictDataclassClassValidationError: Class validation error for validator 'validate_architecture': ValueError: `index_num_heads` must be between 1 and the numbe)"),
    _proven('laguna', SWEEP),
    _proven('lara_mini', "tests (transformers 5.25): Qwen3.5's gated delta-nets beside attention, their states as cache inputs/outputs; f32 (tests/llm/test_families_added.py)"),
    _proven('lfm2', 'tests: gated short convolutions beside attention, their conv states as cache inputs/outputs; f32 (tests/llm/test_families_added.py)'),
    _proven('lfm2_moe', 'tests: gated short convolutions beside attention, their conv states as cache inputs/outputs; a dense layer, then experts; f32 (tests/llm/test_families_added.py)'),
    _proven('lfm3', 'tests: gated short convolutions beside attention, their conv states as cache inputs/outputs; f32 (tests/llm/test_families_added.py)'),
    _proven('llama', 'tests: f32, f16, bf16 checkpoint, Q4_0, LoRA/DoRA merged, f32 cache of an f16 model, stateful cache, reified ops, streamed folder, `t2n llm`'),
    _refused('llama4', 'its complex-valued rotary embedding (aten::polar) has no lowering yet'),
    _refused('llama4_text', 'its complex-valued rotary embedding (aten::polar) has no lowering yet'),
    _refused('longcat_flash', "its export fails (UnsupportedOpsError: 21 op use(s) cannot be exported; nothing was written: - aten::where in module 'model.model.layers.0.mlp.experts' (/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/transfo)"),
    _proven('mamba', 'tests: conv and state-space states as cache inputs/outputs; f32, f16 streamed folder'),
    _proven('mamba2', 'tests: conv and state-space states as cache inputs/outputs; f32, f16 streamed folder'),
    _refused('marian', 'its decoder alone as a causal LM: tract generates other tokens than transformers from token 16 of 16 on a tiny random model; the encoder-decoder checkpoint (MarianMTModel) is exported: see Encoder-decoder models'),
    _refused('mbart', 'its decoder alone as a causal LM: tract generates other tokens than transformers from token 16 of 16 on a tiny random model; the encoder-decoder checkpoint (MBartForConditionalGeneration) is exported: see Encoder-decoder models'),
    _refused('megatron-bert', 'its output holds no key/value cache (a recurrent or encoder model): export it with t2n.export'),
    _proven('mellum', SWEEP),
    _refused('mimo_v2_flash', 'its sliding layers have twice the key/value heads of its full ones: the exported cache has one key/value shape for all layers'),
    _proven('minicpm3', SWEEP),
    _proven('minicpm5_moe', SWEEP),
    _refused('minimax', "it keeps a cache of its own instead of transformers' DynamicCache"),
    _proven('minimax_m2', SWEEP),
    _proven('minimax_m3_vl_text', SWEEP),
    _proven('ministral', SWEEP),
    _proven('ministral3', SWEEP),
    _proven('mistral', 'tests: f32, generating beyond its sliding window'),
    _proven('mixtral', 'tests: `tract_moe_ffn`; f32, f16, streamed folder (f32, f16), Q4_0 experts (object and streamed)'),
    _proven('mllama', SWEEP),
    _proven('modernbert-decoder', SWEEP),
    _proven('moshi', SWEEP),
    _proven('moss_transcribe_diarize', SWEEP),
    _proven('mpt', SWEEP),
    _refused('musicgen', "not proven: the sweep could not build a tiny model from its configuration's defaults (AttributeError: 'MusicgenConfig' object has no attribute 'dropout')"),
    _refused('musicgen_melody', "not proven: the sweep could not build a tiny model from its configuration's defaults (AttributeError: 'MusicgenMelodyConfig' object has no attribute 'dropout')"),
    _proven('mvp', SWEEP),
    _proven('nanochat', SWEEP),
    _proven('nemotron', SWEEP),
    _proven('nemotron_h', "tests: Mamba-2, attention and MLP blocks, the mixers' states as cache inputs/outputs; f32, f16 streamed folder"),
    _proven('olmo', 'tests: f32'),
    _proven('olmo2', SWEEP),
    _proven('olmo3', SWEEP),
    _proven('olmo_hybrid', 'tests: gated delta-nets (a projection each, beta doubled) beside attention, their states as cache inputs/outputs; f32 (tests/llm/test_families_added.py)'),
    _proven('olmoe', 'tests: `tract_moe_ffn` (softmax over all experts); f32, streamed folder'),
    _refused('openai-gpt', 'its output holds no key/value cache (a recurrent or encoder model): export it with t2n.export'),
    _proven('opt', SWEEP),
    _proven('param2moe', SWEEP),
    _refused('pegasus', 'its decoder alone as a causal LM: tract generates other tokens than transformers from token 16 of 16 on a tiny random model; the encoder-decoder checkpoint (PegasusForConditionalGeneration) is exported: see Encoder-decoder models'),
    _proven('persimmon', SWEEP),
    _proven('phi', SWEEP),
    _proven('phi3', 'tests: f32'),
    _proven('phi4_multimodal', SWEEP),
    _proven('phimoe', SWEEP),
    _refused('plbart', "not proven: the sweep could not build a tiny model from its configuration's defaults (ValueError: embed_dim must be divisible by num_heads (got `embed_dim`: 64 and `num_heads`: 12).)"),
    _refused('prophetnet', 'its export fails (TraceError: torch.jit.trace failed on the model: AssertionError: At the moment `use_cache` is only supported for `decoder_input_ids` of length 1)'),
    _proven('qwen2', 'tests: f32, f16, checkpoint folder (f32, f16), stateful cache, reified ops'),
    _proven('qwen2_moe', 'tests: `tract_moe_ffn`, shared expert beside it; f32, f16, streamed folder'),
    _proven('qwen3', 'tests: f32, streamed folder'),
    _proven('qwen3_5', 'tests: its text decoder (Qwen3_5ForCausalLM): gated delta-nets beside attention, their states as cache inputs/outputs; f32 (tests/llm/test_families_added.py)'),
    _proven('qwen3_5_moe', 'tests: its text decoder (Qwen3_5MoeForCausalLM): gated delta-nets beside attention, experts; f32 (tests/llm/test_families_added.py)'),
    _proven('qwen3_5_moe_text', 'tests: gated delta-nets (split projections) beside attention, their states as cache inputs/outputs, experts beside a shared expert; f32 (tests/llm/test_families_added.py)'),
    _proven('qwen3_5_text', 'tests: gated delta-nets (split projections) beside attention, their states as cache inputs/outputs; rotary over three equal position axes on text; f32 (tests/llm/test_families_added.py)'),
    _proven('qwen3_moe', 'tests: `tract_moe_ffn`; f32, streamed folder'),
    _proven('qwen3_next', "tests: gated delta-net states as cache inputs/outputs (tract's gated delta-net op in f16 at head width 128); f32, f16 streamed folder; with experts as `tract_moe_ffn` (f32)"),
    _refused('qwen4_exp', "not proven: the tiny model the sweep builds from its configuration's defaults has only recurrent layers, on which transformers' cache cannot count the tokens seen (its hybrids with attention layers may export: the proven ones are listed here)"),
    _refused('qwen4_exp_text', "not proven: the tiny model the sweep builds from its configuration's defaults has only recurrent layers, on which transformers' cache cannot count the tokens seen (its hybrids with attention layers may export: the proven ones are listed here)"),
    _refused('recurrent_gemma', "not proven: the tiny model the sweep builds from its configuration's defaults has only recurrent layers, on which transformers' cache cannot count the tokens seen (its hybrids with attention layers may export: the proven ones are listed here)"),
    _refused('reformer', "not proven: the sweep could not build a tiny model from its configuration's defaults (AssertionError: If you want to use `ReformerModelWithLMHead` make sure that `is_decoder=True`.)"),
    _refused('rembert', 'its output holds no key/value cache (a recurrent or encoder model): export it with t2n.export'),
    _refused('roberta', 'its output holds no key/value cache (a recurrent or encoder model): export it with t2n.export'),
    _refused('roberta-prelayernorm', 'its output holds no key/value cache (a recurrent or encoder model): export it with t2n.export'),
    _refused('roc_bert', 'its output holds no key/value cache (a recurrent or encoder model): export it with t2n.export'),
    _refused('roformer', 'its output holds no key/value cache (a recurrent or encoder model): export it with t2n.export'),
    _refused('rwkv', 'its output holds no key/value cache (a recurrent or encoder model): export it with t2n.export'),
    _proven('sarvam_mla', SWEEP),
    _proven('sarvam_moe', SWEEP),
    _proven('seed_oss', SWEEP),
    _proven('smollm3', SWEEP),
    _proven('solar_open', SWEEP),
    _proven('stablelm', SWEEP),
    _proven('starcoder2', SWEEP),
    _proven('trocr', SWEEP),
    _proven('vaultgemma', SWEEP),
    _refused('whisper', "its decoder alone as a causal LM is not proven (the sweep could not build a tiny model from its configuration's defaults); the encoder-decoder checkpoint (WhisperForConditionalGeneration) is exported: see Encoder-decoder models"),
    _proven('xglm', SWEEP),
    _refused('xlm', 'its output holds no key/value cache (a recurrent or encoder model): export it with t2n.export'),
    _refused('xlm-roberta', 'its output holds no key/value cache (a recurrent or encoder model): export it with t2n.export'),
    _refused('xlm-roberta-xl', 'its output holds no key/value cache (a recurrent or encoder model): export it with t2n.export'),
    _refused('xlnet', 'its output holds no key/value cache (a recurrent or encoder model): export it with t2n.export'),
    _refused('xlstm', 'it keeps a recurrent state (state-space, linear-attention or xLSTM layers) that the exported cache does not hold yet: export it with t2n.export'),
    _refused('xmod', 'its export fails (ValueError: Input language unknown. Please call `XmodPreTrainedModel.set_default_language()`)'),
    _proven('youtu', 'tests: latent attention; f32, explicit and stateful cache (tests/llm/test_families_added.py)'),
    _proven('zamba', 'tests: multi-head Mamba layers and a shared attention block, their states as cache inputs/outputs; f32, f16 streamed folder'),
    _proven('zamba2', 'tests: Mamba-2 layers and a shared attention block, their states as cache inputs/outputs; f32, f16 streamed folder'),
    _refused('zaya', "not proven: the sweep could not build a tiny model from its configuration's defaults (StrictDataclassClassValidationError: Class validation error for validator 'validate_architecture': ValueError: ZAYA currently supports `num_experts_per_tok=1` o)"),
)
"""One row per model type, sorted (written by ``python -m tools.llm_families rows`` from
the sweep, the families the tests prove named with their forms)."""

FAMILIES: Mapping[str, Family] = MappingProxyType({f.model_type: f for f in _ROWS})


def family(model_type: str | None) -> Family | None:
    """The row of ``model_type`` (None for a type this table does not know)."""
    return FAMILIES.get(model_type or "")


def refusal(model_type: str | None) -> str | None:
    """Why ``t2n.llm`` refuses ``model_type`` (None when it does not)."""
    row = family(model_type)
    return row.note if row is not None and row.status == REFUSED else None


def proven_families() -> list[str]:
    """The model types proven to generate transformers' tokens."""
    return [f.model_type for f in FAMILIES.values() if f.status == PROVEN]


__all__ = ["FAMILIES", "Family", "family", "proven_families", "refusal"]
