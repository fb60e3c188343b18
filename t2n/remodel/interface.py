"""A graph's interface as the application running it sees it: each input and output
with its dtype and (symbolic) shape, the symbols, and the assertions tract is given."""

from __future__ import annotations

from typing import Any

import attrs

from t2n.ir import Graph, Sym, Value


@attrs.frozen
class IOInfo:
    name: str
    dtype: str
    shape: tuple[int | str, ...]

    def __str__(self) -> str:
        return f"{self.name}: {self.dtype}[{', '.join(str(d) for d in self.shape)}]"

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": self.dtype, "shape": list(self.shape)}


@attrs.frozen
class Interface:
    inputs: tuple[IOInfo, ...]
    outputs: tuple[IOInfo, ...]
    symbols: tuple[str, ...]
    assertions: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"inputs": [i.as_dict() for i in self.inputs], "outputs": [o.as_dict() for o in self.outputs],
                "symbols": list(self.symbols), "assertions": list(self.assertions)}

    def lines(self) -> list[str]:
        out = ["inputs:"] + [f"  {i}" for i in self.inputs] + ["outputs:"] + [f"  {o}" for o in self.outputs]
        if self.symbols:
            out.append("symbols: " + ", ".join(self.symbols))
        if self.assertions:
            out.append("assertions: " + "; ".join(self.assertions))
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())


def _io(v: Value, name: str) -> IOInfo:
    return IOInfo(name, v.type.dtype.value, tuple(str(d) if isinstance(d, Sym) else int(d) for d in v.type.shape))


def default_assertions(symbols: list[str], custom: list[str]) -> list[str]:
    """The ``S >= 1`` lines tract's renderer adds for symbols no custom line bounds."""
    bounded = {s for s in symbols if any(c.replace(" ", "").startswith(f"tract_assert{s}>=") for c in custom)}
    return [f"tract_assert {s} >= 1" for s in symbols if s not in bounded]


def graph_interface(graph: Graph) -> Interface:
    ins = graph.info.input_names or tuple(v.name for v in graph.inputs)
    outs = graph.info.output_names or tuple(v.name for v in graph.outputs)
    symbols = sorted(frozenset().union(*(v.symbols() for v in graph.values())))
    custom = [c for c in graph.info.custom_extensions if c.startswith("tract_assert")]
    asserts = default_assertions(symbols, custom) + custom
    return Interface(tuple(_io(v, n) for v, n in zip(graph.inputs, ins)),
                     tuple(_io(v, n) for v, n in zip(graph.outputs, outs)),
                     tuple(symbols), tuple(a[len("tract_assert "):] for a in asserts))
