"""Multimodal (vision-language, audio-language) models: each encoder its own artifact,
the decoder taking the encoders' embeddings beside the tokens and the KV cache, and a
``multimodal.json`` manifest tying them (see ``docs/llm.md``, *Multimodal models*)."""
