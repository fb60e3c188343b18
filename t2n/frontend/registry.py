"""Lowering rules: one typed function per aten op, grouped in families.

A family module defines ``RULES = RuleSet("family")`` and decorates functions with
``@RULES.rule("aten::relu")``. :meth:`LoweringRegistry.default` collects the rule
sets of every module in ``t2n.frontend.lowering`` (nothing global is filled by
import side effects); users extend a copy per compilation. Both are the one registry
type of :mod:`t2n.registry`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from t2n.registry import DuplicateNameError, Registry, Table, collect, entries_of

if TYPE_CHECKING:
    from t2n.frontend.context import LoweringContext

Rule = Callable[["LoweringContext"], Any]


class DuplicateRuleError(DuplicateNameError):
    """Two rules claim the same op."""


@attrs.frozen
class RuleInfo:
    """A rule and what the coverage table says about it."""

    fn: Rule
    family: str
    notes: str = ""


class RuleSet(Table[RuleInfo]):
    """The rules of one family, filled by :meth:`rule` decorators in its module."""

    entry: ClassVar[str] = "rule"

    @property
    def rules(self) -> dict[str, RuleInfo]:
        return self.entries

    def rule(self, *names: str, notes: str = "") -> Callable[[Rule], Rule]:
        def deco(fn: Rule) -> Rule:
            for n in names:
                self.add(n, fn, notes)
            return fn

        return deco

    def add(self, name: str, fn: Rule, notes: str = "") -> None:
        self.register(name, RuleInfo(fn, self.family, notes))

    def duplicate(self, name: str, first: RuleInfo, second: RuleInfo) -> Exception:
        return DuplicateRuleError(
            f"{name} has two rules in family {self.family} ({_qualname(first.fn)} and {_qualname(second.fn)})"
        )


def _qualname(fn: Rule) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


class LoweringRegistry(Registry[RuleInfo]):
    """Op name → rule. ``extended`` returns a new registry; duplicate names raise
    unless ``override=True`` says the user means to replace a built-in rule."""

    entry: ClassVar[str] = "rule"

    def extended(
        self,
        rules: RuleSet | Mapping[str, Rule] | Iterable[RuleSet],
        *,
        override: bool = False,
    ) -> LoweringRegistry:
        sets: list[RuleSet]
        if isinstance(rules, RuleSet):
            sets = [rules]
        elif isinstance(rules, Mapping):
            rs = RuleSet("user")
            for k, fn in rules.items():
                rs.add(k, fn)
            sets = [rs]
        else:
            sets = list(rules)
        return self.merged(entries_of(sets), override=override)

    def duplicate(self, name: str, first: RuleInfo, second: RuleInfo) -> Exception:
        return DuplicateRuleError(
            f"{name} already has a rule (family {first.family}); pass override=True to replace it"
        )

    _default: LoweringRegistry | None = None

    @classmethod
    def default(cls) -> LoweringRegistry:
        """The ``RULES`` of every module in ``t2n.frontend.lowering``."""
        if cls._default is None:
            cls._default = LoweringRegistry().extended(collect("t2n.frontend.lowering", "RULES", RuleSet))
        return cls._default
