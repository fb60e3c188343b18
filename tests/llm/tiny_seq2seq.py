"""Tiny random-init encoder-decoder models (a few kB of weights each) whose greedy
generation varies: weights drawn wider than the default init (the frozen sinusoidal
position tables of Marian, Pegasus and Whisper's encoder too: with their own tables,
Marian's tiny models repeat one token) and an output head apart from the embeddings, so
that the next token is not the current one again. A folder saved from such a model gets
its sinusoidal tables back when transformers loads it."""

from __future__ import annotations

from typing import Any

import torch

VOCAB = 96

WHISPER_TOKENS = dict(start=90, eos=89, languages={"<|en|>": 91, "<|fr|>": 92},
                      tasks={"transcribe": 93, "translate": 94}, no_timestamps=95)
"""Whisper's special tokens in the tiny vocabulary (no timestamp tokens: the no-timestamps
token is the last id)."""


def _sizes(**extra: Any) -> dict[str, Any]:
    return dict(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
                tie_word_embeddings=False, **extra)


def _whisper(tf: Any) -> torch.nn.Module:
    t = WHISPER_TOKENS
    config = tf.WhisperConfig(
        vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, num_mel_bins=8, max_source_positions=16,
        max_target_positions=64, decoder_start_token_id=t["start"], eos_token_id=t["eos"], pad_token_id=t["eos"],
        bos_token_id=t["eos"], suppress_tokens=None, begin_suppress_tokens=None, tie_word_embeddings=False)
    model = tf.WhisperForConditionalGeneration(config)
    generation = model.generation_config
    generation.lang_to_id, generation.task_to_id = dict(t["languages"]), dict(t["tasks"])
    generation.no_timestamps_token_id, generation.is_multilingual = t["no_timestamps"], True
    return model


def _builders(tf: Any) -> dict[str, Any]:
    return {
        "whisper": lambda: _whisper(tf),
        "bart": lambda: tf.BartForConditionalGeneration(tf.BartConfig(**_sizes())),
        "marian": lambda: tf.MarianMTModel(tf.MarianConfig(**_sizes(decoder_start_token_id=95, pad_token_id=95))),
        "t5": lambda: tf.T5ForConditionalGeneration(tf.T5Config(
            vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, tie_word_embeddings=False,
            relative_attention_num_buckets=8, relative_attention_max_distance=16, decoder_start_token_id=0)),
        "m2m_100": lambda: tf.M2M100ForConditionalGeneration(tf.M2M100Config(**_sizes())),
        "pegasus": lambda: tf.PegasusForConditionalGeneration(tf.PegasusConfig(**_sizes())),
        "mbart": lambda: tf.MBartForConditionalGeneration(tf.MBartConfig(**_sizes())),
        "flan_t5": lambda: tf.T5ForConditionalGeneration(tf.T5Config(
            vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, tie_word_embeddings=False,
            relative_attention_num_buckets=8, relative_attention_max_distance=16, decoder_start_token_id=0,
            feed_forward_proj="gated-gelu")),
        "mt5": lambda: tf.MT5ForConditionalGeneration(tf.MT5Config(
            vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, tie_word_embeddings=False,
            relative_attention_num_buckets=8, relative_attention_max_distance=16, decoder_start_token_id=0)),
    }


FAMILIES = ("whisper", "bart", "marian", "t5", "m2m_100", "pegasus", "mbart", "mt5", "flan_t5")

SEEDS = {"whisper": 1, "bart": 1, "marian": 2, "t5": 1, "m2m_100": 2, "pegasus": 2, "mbart": 1, "mt5": 3, "flan_t5": 3}
"""A seed per family whose greedy generation of 12 tokens holds 4 or more distinct ones."""

RULES: dict[str, dict[str, Any]] = {
    "whisper": {"suppress_tokens": [42], "begin_suppress_tokens": [56]},
    "marian": {"bad_words_ids": [[95]]},
    "m2m_100": {"forced_bos_token_id": 50},
}
"""Generation settings the published checkpoints of these families hold (suppressed
tokens, the padding token as a bad word, the target language forced first)."""


SCALES = {"mt5": 0.4, "flan_t5": 0.4}
"""Weight scales other than 0.6: the gated-GELU feed-forward layers grow activations
faster (at 0.6 a logit of tract and of PyTorch differ by 3e-4, past ``approximate``)."""


def tiny_seq2seq(family: str, seed: int | None = None, scale: float | None = None) -> torch.nn.Module:
    """A tiny model of ``family`` in eval mode (seeded: the same weights each call), with
    the generation settings of :data:`RULES`."""
    import transformers as tf

    torch.manual_seed(SEEDS[family] if seed is None else seed)
    model = _builders(tf)[family]()
    with torch.no_grad():
        for param in model.parameters():
            if param.dim() >= 2:
                param.normal_(0.0, SCALES.get(family, 0.6) if scale is None else scale)
    for name, value in RULES.get(family, {}).items():
        setattr(model.generation_config, name, value)
    return model.eval()


def source(family: str, seed: int = 5, length: int = 9) -> dict[str, torch.Tensor]:
    """What a tokenizer (ids and mask) or Whisper's processor (8 mel bins, 32 frames) returns."""
    generator = torch.Generator().manual_seed(seed)
    if family == "whisper":
        return {"input_features": torch.randn((1, 8, 32), generator=generator)}
    ids = torch.randint(3, 90, (1, length), generator=generator)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
