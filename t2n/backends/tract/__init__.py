"""The tract target and its dialect: tract's own IR ops, the passes that make them, the
version gates, and how an artifact runs in tract (this release or another one)."""
