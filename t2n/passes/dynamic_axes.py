"""Make input axes symbolic and check that every op follows.

``DynamicAxes({"inp": {1: "S"}})`` replaces the traced sizes of the named input axes
by symbols and re-infers every type and known value, so shape arithmetic recorded
by the trace (``x.size(1)``, ``view(b, -1)``, ``arange(n)``…) becomes symbolic and
constant folding turns it into expressions such as ``S``, ``2 * S``, ``S + P``.

Sizes that the trace baked in anyway (a Python int taken from a shape inside
``forward``) cannot follow. The pass finds them two ways and reports each with the
op and module path: values the frontend had to turn into constants although they
were computed from shapes (recorded at lowering), and ops whose shape rules no
longer hold when the symbols take other values (checked at two other sizes).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping, Sequence

import attrs
import numpy as np

from t2n.errors import DynamicAxesError
from t2n.ir import Graph, Op, Sym, TensorType, Value
from t2n.ir.dims import Dim, SymbolicComparisonError, has_sym, valid_symbol_name
from t2n.ir.identifiers import identifier_problem
from t2n.ir.schema import InferContext
from t2n.ir.types import Shape
from t2n.passes.base import Pass, PassResult

log = logging.getLogger("t2n.passes")

class BakedSizeWarning(UserWarning):
    """A size that depends on a dynamic axis was fixed at its traced value."""


def list_form_symbol(name: str, axis: int) -> str:
    """The symbol given to axis ``axis`` of input ``name`` in the list form
    ``{name: [axes]}``: ``x_dim1`` for axis 1, ``x_dim_minus1`` for axis -1."""
    return f"{name}_dim{axis}" if axis >= 0 else f"{name}_dim_minus{-axis}"


def dynamic_axes_form(spec: object, where: str = "dynamic_axes") -> dict[str, dict[int, str]]:
    """``spec`` as ``{input_name: {axis: symbol}}``, checked for form only (no model needed).

    Accepted: ``{name: {axis: symbol}}``, and ``{name: [axes]}`` (as in ONNX export),
    whose symbols are named by :func:`list_form_symbol`. Axes are Python ints (a string
    such as ``"1"`` is refused rather than guessed at, and so is a bool); symbols are
    names tract accepts. Input names and axis ranges are checked against the model by
    :func:`normalize_dynamic_axes`.
    """
    if spec is None:
        return {}
    if not isinstance(spec, Mapping):
        raise DynamicAxesError(f"{where} must be a dict {{input_name: {{axis: symbol}}}}, got {spec!r}")
    out: dict[str, dict[int, str]] = {}
    for name, axes in spec.items():
        if not isinstance(name, str):
            raise DynamicAxesError(f"{where}: keys are input names (strings), got {name!r}")
        if isinstance(axes, (list, tuple)):
            axes = {a: list_form_symbol(name, a) if _is_axis(a) else "" for a in axes}
        if not isinstance(axes, Mapping):
            raise DynamicAxesError(
                f"{where}[{name!r}] must map axis → symbol name ({{1: 'S'}}) or list axes ([1]), got {axes!r}"
            )
        for axis, sym in axes.items():
            if not _is_axis(axis):
                hint = f"; write it as the integer {int(axis)}" if isinstance(axis, str) and axis.lstrip("-").isdigit() else ""
                raise DynamicAxesError(f"{where}[{name!r}]: axis {axis!r} is not an int{hint}")
            problem = identifier_problem(sym, tract=True) if isinstance(sym, str) else "is not a string"
            if problem or not valid_symbol_name(sym):
                raise DynamicAxesError(
                    f"{where}[{name!r}][{axis}]: {sym!r} is not a symbol name tract accepts "
                    f"(it {problem or 'is not one'}); use letters, digits and _, not starting "
                    "with a digit, not an NNEF keyword"
                )
            out.setdefault(name, {})[axis] = sym
    return out


def _is_axis(axis: object) -> bool:
    return isinstance(axis, (int, np.integer)) and not isinstance(axis, (bool, np.bool_))


def normalize_dynamic_axes(
    spec: Mapping[str, Mapping[int, str] | Sequence[int]] | None,
    inputs: Mapping[str, int],
) -> dict[str, dict[int, str]]:
    """Validate ``{input_name: {axis: symbol}}`` (or ``{input_name: [axes]}``, see
    :func:`dynamic_axes_form`) against the graph's inputs (name → rank)."""
    out: dict[str, dict[int, str]] = {}
    for name, axes in dynamic_axes_form(spec).items():
        if name not in inputs:
            raise DynamicAxesError(
                f"dynamic_axes names input {name!r}, but the inputs are: {', '.join(inputs)}"
            )
        rank = inputs[name]
        for axis, sym in axes.items():
            if not -rank <= axis < rank:
                raise DynamicAxesError(
                    f"dynamic_axes[{name!r}]: axis {axis!r} is out of range for a rank-{rank} input"
                )
            if out.get(name, {}).get(axis % rank, sym) != sym:
                raise DynamicAxesError(
                    f"dynamic_axes[{name!r}]: axis {axis % rank} is given twice, as "
                    f"{out[name][axis % rank]!r} and {sym!r}"
                )
            out.setdefault(name, {})[int(axis) % rank] = sym
    return out


@attrs.frozen
class DynamicAxes(Pass):
    """Replace traced input sizes by symbols; warn (or raise) where sizes were baked in.

    Idempotent: on a graph whose axes already are these symbols it changes nothing and
    reports ``modified=False`` (the traced sizes are kept in ``graph.info.symbols``).
    An axis that already is another symbol is refused with a ``DynamicAxesError``.
    """

    axes: Mapping[str, Mapping[int, str]]
    strict: bool = False

    name = "dynamic-axes"

    def run(self, graph: Graph) -> PassResult:
        if not self.axes:
            return PassResult(graph, False, {})
        ranks = {v.name: v.rank for v in graph.inputs}
        spec = normalize_dynamic_axes(self.axes, ranks)
        traced: dict[str, int] = dict(graph.info.symbols)
        retyped_inputs = 0
        for v in graph.inputs:
            if v.name in spec:
                retyped_inputs += self._make_symbolic(graph, v, spec[v.name], traced)
        if not retyped_inputs:  # already done (a second run): nothing to change or report
            return PassResult(graph, False, {"symbols": 0, "retyped": 0, "baked": 0})
        changed = graph.reinfer()
        changed += self._follow_shapes(graph, spec)
        problems = list(graph.info.size_conversions) + self.baked_values(graph) + self.inconsistent_ops(graph, traced)
        for p in problems:
            log.warning("%s", p)
        if problems:
            if self.strict:
                raise DynamicAxesError("sizes baked into the trace:\n  " + "\n  ".join(problems))
            warnings.warn(
                "some sizes do not follow the dynamic axes (the artifact is only right at the "
                "traced size for them):\n  " + "\n  ".join(problems),
                BakedSizeWarning,
                stacklevel=2,
            )
        graph.info.symbols = dict(sorted(traced.items()))
        graph.info.baked_sizes = problems
        return PassResult(graph, True, {"symbols": len(traced), "retyped": changed,
                                        "baked": len(problems)})

    @staticmethod
    def _make_symbolic(graph: Graph, v: Value, axes: Mapping[int, str], traced: dict[str, int]) -> int:
        """Give input ``v`` its symbols (recording their traced sizes); 1 if it changed.
        An axis that already is its symbol stays; one that is another symbol is refused."""
        dims = list(v.type.shape)
        for axis, sym in axes.items():
            size = dims[axis]
            if isinstance(size, int):
                if sym in traced and traced[sym] != size:
                    raise DynamicAxesError(
                        f"symbol {sym} stands for sizes {traced[sym]} and {size} in the traced inputs; "
                        "give different symbols to axes that can differ"
                    )
                traced[sym] = size
            elif size != Sym(sym):
                raise DynamicAxesError(
                    f"dynamic_axes[{v.name!r}][{axis}] = {sym!r}, but that axis already is the "
                    f"symbolic size {size}; use one symbol per axis"
                )
            dims[axis] = Sym(sym)
        new = TensorType(v.type.dtype, Shape(dims), v.type.quant)
        if new == v.type:
            return 0
        graph.set_input_type(v, new)
        return 1

    @staticmethod
    def _follow_shapes(graph: Graph, spec: Mapping[str, Mapping[int, str]]) -> int:
        """Inputs whose shape follows a size value of the graph (``graph.info.input_shapes_from``)
        and that ``dynamic_axes`` does not name take that value's sizes, symbolic now; one
        round per input at most, as one may follow another."""
        changed = 0
        live = {id(v) for op in graph.ops() for v in op.outputs}
        followers = {v.name: v for v in graph.inputs if v.name in graph.info.input_shapes_from and v.name not in spec}
        for _ in range(len(followers)):
            retyped = 0
            for name, v in followers.items():
                source = graph.info.input_shapes_from[name]
                known = source.known
                if id(source) not in live or known is None or known.shape != (v.rank,) or not has_sym(known):
                    continue
                new = TensorType(v.type.dtype, Shape(known.tolist()), v.type.quant)
                if new != v.type:
                    graph.set_input_type(v, new)
                    retyped += 1
            if not retyped:
                break
            changed += retyped + graph.reinfer()
        return changed

    def baked_values(self, graph: Graph) -> list[str]:
        """Constants the frontend took from values that now depend on a symbol."""
        out = []
        for baked in graph.info.baked_constants:
            value, loc, what = baked.value, baked.loc, baked.what
            if value.known is not None and has_sym(value.known):
                out.append(f"{loc}: {what} is computed from a dynamic size but was used as the "
                           f"constant {value.known.tolist()!r} at trace time")
            elif value.known is None:  # it was known at the traced size: a dynamic size changed that
                out.append(f"{loc}: {what} was used as a constant at trace time, but under the "
                           "dynamic axes it is computed in ways that stay unknown until run time")
        return out

    def inconsistent_ops(self, graph: Graph, traced: Mapping[str, int]) -> list[str]:
        """Ops whose shape rules fail, or give other shapes, once the symbols take other
        values (twice and three times the traced sizes)."""
        out: list[str] = []
        seen: set[int] = set()
        for factor in (2, 3):
            bindings = {s: v * factor for s, v in traced.items()}
            for op in graph.ops():
                if op.seq in seen or not _touches_symbols(op, bindings):
                    continue
                reason = _check_at(op, bindings)
                if reason:
                    seen.add(op.seq)
                    out.append(f"{op.loc}: {reason}")
        return out


def _touches_symbols(op: Op, bindings: Mapping[str, int]) -> bool:
    """``op`` reads a symbolic size, and every symbol it reads has a traced size (a
    symbol the graph had before this pass, with no traced size, cannot be checked)."""
    found = frozenset().union(*(v.symbols() for v in op.inputs))
    return bool(found) and found <= bindings.keys()


def _bind_dim(d: Dim, bindings: Mapping[str, int]) -> Dim:
    return d.evaluate(bindings) if isinstance(d, Sym) else d


def _bind_type(t: TensorType, bindings: Mapping[str, int]) -> TensorType:
    return TensorType(t.dtype, Shape(_bind_dim(d, bindings) for d in t.shape), t.quant)


def _bind_known(k: np.ndarray | None, bindings: Mapping[str, int]) -> np.ndarray | None:
    if k is None or k.dtype != object:
        return k
    flat = [_bind_dim(d, bindings) if isinstance(d, Sym) else d for d in k.reshape(-1).tolist()]
    return np.asarray(flat, dtype=np.int64).reshape(k.shape)


def _check_at(op: Op, bindings: Mapping[str, int]) -> str:
    ctx = InferContext(
        tuple(_bind_type(v.type, bindings) for v in op.inputs),
        op.attrs,
        tuple(_bind_known(v.known, bindings) for v in op.inputs),
    )
    where = ", ".join(f"{k}={v}" for k, v in bindings.items())
    try:
        types = op.schema.infer(ctx)
    except (ValueError, SymbolicComparisonError, ArithmeticError) as exc:
        return f"'{op.kind}' does not hold at {where}: {exc}"
    for v, t in zip(op.outputs, types):
        want = _bind_type(v.type, bindings)
        if t.shape != want.shape:
            return (f"'{op.kind}' gives shape {list(t.shape)} at {where}, but the graph says "
                    f"{list(v.type.shape)}: a size was baked in")
    return ""


__all__ = ["BakedSizeWarning", "DynamicAxes", "normalize_dynamic_axes", "Value"]
