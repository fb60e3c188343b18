"""What every LLM export shares, below the family code: the options object, the
checkpoint source (folders, streaming, conversions, adapters), the cache's interface
(layout and tract's forms as passes), samples, tract runs and the check against
``transformers``' own model."""
