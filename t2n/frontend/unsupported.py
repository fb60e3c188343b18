"""What a lowering rule raises for a form it cannot export: every such problem in the
model is collected and reported at once (``raise ctx.unsupported("why")``)."""


class UnsupportedHere(Exception):
    """Raised by a rule for an option or input form it cannot export."""


class NotConstantError(UnsupportedHere):
    """An argument that must be known at export time is computed at run time."""
