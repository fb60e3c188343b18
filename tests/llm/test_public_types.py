"""No ``Any`` and no ``**kwargs`` in the public signatures of ``t2n.llm``: every public
function of each of its modules, and every public method (the constructor included) of
each public class, names its parameters' and its result's real types (issue 41)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import t2n.llm

ANY = re.compile(r"\bAny\b")

def _modules() -> Iterator[ModuleType]:
    yield t2n.llm
    for info in pkgutil.walk_packages(t2n.llm.__path__, "t2n.llm."):
        yield importlib.import_module(info.name)


def _public(name: str) -> bool:
    return not name.startswith("_") or name == "__init__"


def _functions(module: ModuleType) -> Iterator[tuple[str, Callable[..., object]]]:
    """(qualified name, function) of each public function and public method of a public
    class that ``module`` defines (names it imports from elsewhere are not its own)."""
    for name, value in vars(module).items():
        if name.startswith("_") or getattr(value, "__module__", None) != module.__name__:
            continue
        if inspect.isfunction(value):
            yield f"{module.__name__}.{name}", value
        elif inspect.isclass(value):
            for attr, member in vars(value).items():
                if isinstance(member, (staticmethod, classmethod)):
                    member = member.__func__
                elif isinstance(member, property):
                    member = member.fget
                if _public(attr) and inspect.isfunction(member) and member.__module__ == module.__name__:
                    yield f"{module.__name__}.{name}.{attr}", member


def _problems(qualname: str, function: Callable[..., object]) -> list[str]:
    signature = inspect.signature(function)
    found = []
    for parameter in signature.parameters.values():
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            found.append(f"{qualname}: **{parameter.name}")
        elif parameter.annotation is not inspect.Parameter.empty and ANY.search(str(parameter.annotation)):
            found.append(f"{qualname}: {parameter.name}: {parameter.annotation}")
    returned = signature.return_annotation
    if returned is not inspect.Signature.empty and ANY.search(str(returned)):
        found.append(f"{qualname}: -> {returned}")
    return found


def public_signature_problems() -> list[str]:
    """Each ``Any`` annotation and each ``**kwargs`` of a public signature of t2n.llm."""
    return [p for module in _modules() for name, function in _functions(module) for p in _problems(name, function)]


def test_public_signatures_name_their_types() -> None:
    problems = public_signature_problems()
    assert not problems, f"{len(problems)} public signature(s) of t2n.llm with Any or **kwargs:\n" + "\n".join(problems)


def test_the_check_finds_any_and_kwargs() -> None:
    """The check itself: a signature with ``Any`` or ``**kwargs`` is found, a typed one is not."""

    def loose(model: Any, *args: int, **kwargs: object) -> list[Any]:
        return []

    def typed(model: object, *, count: int = 1) -> list[int]:
        return []

    assert _problems("loose", loose) == ["loose: model: Any", "loose: **kwargs", "loose: -> list[Any]"]
    assert _problems("typed", typed) == []


def test_every_module_is_walked() -> None:
    names = {m.__name__ for m in _modules()}
    assert {"t2n.llm.text.export", "t2n.llm.common.options", "t2n.llm.multimodal.export", "t2n.llm.multimodal.generate"} <= names


def test_export_llm_takes_exactly_the_options_of_llm_export_options() -> None:
    """One list of options: ``export_llm``'s keywords are ``LLMExportOptions``' fields, with
    the same defaults, so an option added to one and not the other fails here."""
    import attrs

    from t2n.llm.common.options import LLMExportOptions
    from t2n.llm.entry import export_llm

    keywords = {name: p.default for name, p in inspect.signature(export_llm).parameters.items()
                if p.kind is inspect.Parameter.KEYWORD_ONLY}
    fields = {f.name: f.default for f in attrs.fields(LLMExportOptions)}
    assert keywords == fields
