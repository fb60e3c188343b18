"""Lowering rules: one typed function per aten op, grouped in families.

A family module defines ``RULES = RuleSet("family")`` and decorates functions with
``@RULES.rule("aten::relu")``. :meth:`LoweringRegistry.default` collects the rule
sets of every module in ``t2n.frontend.lowering`` (nothing global is filled by
import side effects); users extend a copy per compilation.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from t2n.errors import T2NError

if TYPE_CHECKING:
    from t2n.frontend.context import LoweringContext

Rule = Callable[["LoweringContext"], Any]


class DuplicateRuleError(T2NError, KeyError):
    """Two rules claim the same op."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


@attrs.frozen
class RuleInfo:
    """A rule and what the coverage table says about it."""

    fn: Rule
    family: str
    notes: str = ""


class RuleSet:
    """The rules of one family, filled by :meth:`rule` decorators in its module."""

    def __init__(self, family: str) -> None:
        self.family = family
        self.rules: dict[str, RuleInfo] = {}

    def rule(self, *names: str, notes: str = "") -> Callable[[Rule], Rule]:
        def deco(fn: Rule) -> Rule:
            for n in names:
                self.add(n, fn, notes)
            return fn

        return deco

    def add(self, name: str, fn: Rule, notes: str = "") -> None:
        if name in self.rules:
            raise DuplicateRuleError(
                f"{name} has two rules in family {self.family} "
                f"({_qualname(self.rules[name].fn)} and {_qualname(fn)})"
            )
        self.rules[name] = RuleInfo(fn, self.family, notes)


def _qualname(fn: Rule) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


class LoweringRegistry:
    """Op name → rule. ``extended`` returns a new registry; duplicate names raise
    unless ``override=True`` says the user means to replace a built-in rule."""

    def __init__(self, rules: Mapping[str, RuleInfo] | None = None) -> None:
        self._rules: dict[str, RuleInfo] = dict(rules or {})

    def get(self, name: str) -> RuleInfo | None:
        return self._rules.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._rules

    def names(self) -> list[str]:
        return sorted(self._rules)

    def items(self) -> Iterable[tuple[str, RuleInfo]]:
        return sorted(self._rules.items())

    def extended(
        self,
        rules: RuleSet | Mapping[str, Rule] | Iterable[RuleSet],
        *,
        override: bool = False,
    ) -> LoweringRegistry:
        out = dict(self._rules)
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
        for rs in sets:
            for name, info in rs.rules.items():
                if name in out and not override:
                    raise DuplicateRuleError(
                        f"{name} already has a rule (family {out[name].family}); "
                        "pass override=True to replace it"
                    )
                out[name] = info
        return LoweringRegistry(out)

    _default: LoweringRegistry | None = None

    @classmethod
    def default(cls) -> LoweringRegistry:
        if cls._default is None:
            import t2n.frontend.lowering as pkg

            sets = []
            for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
                mod = importlib.import_module(f"{pkg.__name__}.{info.name}")
                rs = getattr(mod, "RULES", None)
                if isinstance(rs, RuleSet):
                    sets.append(rs)
            cls._default = LoweringRegistry().extended(sets)
        return cls._default
