"""What the trace records around submodule calls and custom autograd Functions, without
changing anything of torch for the rest of the process.

* Scopes: each submodule call of the traced model is recorded as a scope
  (``__module.model.layers.0``, the names ``torch.jit.trace`` gives them) so that
  errors can name module paths. The tracer pushes a scope only for modules in a map
  that is global to torch; instead, each module instance's ``forward`` is wrapped for
  the duration of the trace and pushes its own scope, only on the tracing thread.
* Extracted modules: the same wrapper sends the call to the module's extractor
  (:mod:`t2n.frontend.extractors`).
* Custom ``torch.autograd.Function``: the tracer records an ``apply`` as one
  ``prim::PythonOp`` node and keeps the ops its ``forward`` ran as the node's
  ``Subgraph``; :func:`inline_autograd_functions` puts those ops in its place.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator
from typing import Any

import torch

from t2n.frontend import torch_private
from t2n.frontend.extractors import ExtractedCalls

_MISSING = object()


def _wrapped(own: Callable[..., Any], traced: Callable[..., Any], scope: str, thread: int) -> Callable[..., Any]:
    """``own`` (the module's forward) for other threads and outside the trace; on the
    tracing thread, ``traced`` inside the module's scope."""

    @functools.wraps(own)
    def call(*args: Any, **kwargs: Any) -> Any:
        state = torch_private.tracing_state() if threading.get_ident() == thread else None
        if state is None:
            return own(*args, **kwargs)
        state.push_scope(scope)
        try:
            return traced(*args, **kwargs)
        finally:
            state.pop_scope()

    return call


@contextlib.contextmanager
def module_calls_recorded(root: torch.nn.Module, extracted: ExtractedCalls | None) -> Iterator[None]:
    """Wrap the ``forward`` of each module instance under ``root`` (first name of a
    shared one) while tracing: it records its scope, and extracted ones go to their
    extractor. The instances are restored after, whatever happens."""
    thread = threading.get_ident()
    names: dict[int, tuple[str, torch.nn.Module]] = {}
    for name, sub in root.named_modules(remove_duplicate=False):
        names.setdefault(id(sub), (name, sub))
    saved: list[tuple[torch.nn.Module, Any]] = []
    try:
        for name, module in names.values():
            own = vars(module).get("forward", _MISSING)
            forward = traced = module.forward
            extractor = extracted.claims(module) if extracted is not None and name else None
            if extractor is not None and extracted is not None:
                traced = extracted.wrap(module, _model_path(name), extractor, forward)
            saved.append((module, own))
            scope = f"__module.{name}" if name else "__module"
            module.forward = _wrapped(forward, traced, scope, thread)  # type: ignore[method-assign]
        yield
    finally:
        for module, own in reversed(saved):
            if own is _MISSING:
                del module.forward
            else:
                module.forward = own  # type: ignore[method-assign]


def _model_path(name: str) -> str:
    """``model.blocks.0`` → ``blocks.0``; the model itself → ``""`` (the wrapper's names)."""
    return "" if name == "model" else name.removeprefix("model.")


def inline_autograd_functions(graph: torch._C.Graph, extracted: ExtractedCalls | None) -> list[torch._C.Node]:
    """Replace each ``prim::PythonOp`` of a custom ``autograd.Function`` by the ops its
    forward ran (nested Functions too). Extracted modules' nodes are left; so are the
    nodes without a recorded forward, which are returned."""
    opaque: list[torch._C.Node] = []
    changed = True
    while changed:
        changed = False
        for node in _python_ops(graph.block()):
            if extracted is not None and extracted.call_of(node) is not None:
                continue
            if not node.hasAttribute("Subgraph"):
                if node not in opaque:
                    opaque.append(node)
                continue
            _inline(graph, node)
            changed = True
    return opaque


def _python_ops(block: torch._C.Block) -> list[torch._C.Node]:
    out: list[torch._C.Node] = []
    for node in block.nodes():
        if node.kind() == "prim::PythonOp":
            out.append(node)
        for sub in node.blocks():
            out += _python_ops(sub)
    return out


def _inline(graph: torch._C.Graph, node: torch._C.Node) -> None:
    sub = node.g("Subgraph")
    with graph.insert_point_guard(node):
        outs = graph.insertGraph(sub, list(node.inputs()))
    if node.outputsSize() == 1 and len(outs) > 1:  # the Function returned a tuple
        tup = node.output()
        for use in list(tup.uses()):
            user = use.user
            if user.kind() == "prim::TupleUnpack":
                for o, v in zip(user.outputs(), outs):
                    o.replaceAllUsesWith(v)
                user.destroy()
        if tup.uses():
            with graph.insert_point_guard(node):
                built = graph.insertNode(graph.create("prim::TupleConstruct", outs, 1))
            built.output().setType(tup.type())
            tup.replaceAllUsesWith(built.output())
    else:
        for o, v in zip(node.outputs(), outs):
            o.replaceAllUsesWith(v)
    node.destroy()


__all__ = ["inline_autograd_functions", "module_calls_recorded"]
