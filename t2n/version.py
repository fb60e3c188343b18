"""The version of t2n (written into every artifact's properties)."""

__version__ = "0.1.0"
