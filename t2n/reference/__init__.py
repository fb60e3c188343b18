"""Independent references: the user's model called through its own library's public API
(``transformers``' forward on the whole sequence without a cache, ...), compared with
what an artifact computed in its engine.

Nothing here calls t2n's wrappers: they are what is traced, so a check through them
would share the mistakes it is meant to catch."""
