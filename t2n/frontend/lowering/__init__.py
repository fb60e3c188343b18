"""Lowering rule families. Each module defines ``RULES`` (a RuleSet); see
:meth:`t2n.frontend.registry.LoweringRegistry.default`."""
