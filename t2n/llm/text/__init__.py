"""Decoder-only (text) language models: one artifact with its KV cache."""
