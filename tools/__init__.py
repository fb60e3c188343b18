"""Generators of the project's documentation tables (run by hand from the repository
root, e.g. ``python -m tools.operator_table``; checked by the tests)."""
