"""The traced decoder of a language model: the KV-cache wrapper around ``transformers``'
forward, recurrent states of hybrid models, mixture-of-experts routing, and the modes a
decoder's artifact declares. The text and multimodal exports build on it."""
