"""Random draws inside ``forward`` (``torch.randn``, ``rand``, ``randn_like``,
``normal``, ``x.normal_()``...), which an artifact cannot reproduce: tract has no
PyTorch generator, so the numbers would differ from PyTorch's for every call.

By default each draw is refused, naming its module and op (:data:`REFUSAL`). With
``compile(..., sampling="inputs")`` each draw becomes an input of the graph, named
``noise_0``, ``noise_1``... in the order of the graph, that takes the values the op
would have returned (the caller gives the noise): the artifact then computes
PyTorch's numbers for the same noise. The draws PyTorch made while the model was read
(the trace, or the run of the exported program) are kept as those inputs' example
values, so that ``artifact.check()`` compares like with like.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import torch
import torch.fx

from t2n.errors import InvalidArgumentError, OpProblem, SamplingOpsError, UnsupportedOpsError
from t2n.frontend.context import module_path, source_of

SAMPLING_MODES = ("refuse", "inputs")
"""The values of ``compile(sampling=...)``."""

DRAW_FUNCTIONS = frozenset({
    "randn", "rand", "randn_like", "rand_like", "randint", "randint_like", "normal", "normal_",
    "uniform_", "bernoulli", "bernoulli_", "exponential_", "cauchy_", "log_normal_", "geometric_",
    "random_", "multinomial", "randperm", "poisson", "binomial",
})
"""The torch functions and tensor methods that draw random numbers, by name."""

SAMPLING_KINDS = frozenset({f"aten::{n}" for n in DRAW_FUNCTIONS} | {
    "aten::normal_functional", "aten::uniform", "aten::_standard_gamma",
    "aten::_sample_dirichlet",
})
"""The aten ops of those draws, as traces (and torch.export's decompositions) spell them."""

REFUSAL = (
    "{op} draws random numbers inside the graph, which an artifact cannot reproduce (tract has "
    "no PyTorch generator); compile(..., sampling=\"inputs\") makes each draw a graph input that "
    "the caller fills with the noise")
"""Why a draw is refused under ``sampling="refuse"`` (the default)."""

UNRECORDED = (
    "{op} draws random numbers, and sampling=\"inputs\" could not see the values PyTorch drew "
    "here (only draws made by Python code of a traced nn.Module or an exported program are "
    "seen, not those inside a ScriptModule or a C++ op); draw the noise outside forward and "
    "pass it in")


@attrs.frozen
class NoiseDraw:
    """One draw of the model as a graph input: the op that drew it, where, and the values
    PyTorch drew while the model was read (the input's example value)."""

    key: Any
    """The frontend's handle on the op: the name of a traced value, an FX node's name."""
    kind: str
    module: str
    source: str
    values: torch.Tensor
    name: str = ""

    def describe(self) -> dict[str, Any]:
        """The input as ``artifact.stats["noise_inputs"]`` lists it."""
        return {"name": self.name, "op": self.kind, "module": self.module, "source": self.source,
                "shape": list(self.values.shape), "dtype": str(self.values.dtype).removeprefix("torch.")}


def check_sampling(value: object) -> str:
    """``compile(sampling=...)``: one of :data:`SAMPLING_MODES`."""
    if value not in SAMPLING_MODES:
        raise InvalidArgumentError(
            f"sampling must be one of {', '.join(map(repr, SAMPLING_MODES))}, got {value!r}: \"refuse\" "
            "refuses random draws inside forward, \"inputs\" makes each one a graph input")
    return str(value)


def is_draw(func: Any) -> bool:
    """Whether a torch function or tensor method draws random numbers."""
    return getattr(func, "__name__", "") in DRAW_FUNCTIONS


def script_draws(graph: torch._C.Graph, drawn: Mapping[str, torch.Tensor], scope_prefix: str) -> list[NoiseDraw]:
    """The draws of a traced graph in graph order, with the values the trace drew for
    them (``drawn``: the traced value's name → tensor). A draw whose values were not seen
    is left out: its rule refuses it (:data:`UNRECORDED`)."""
    out = []
    for node in graph.nodes():
        if node.kind() in SAMPLING_KINDS and node.outputsSize() == 1:
            key = node.output().debugName()
            if key in drawn:
                out.append(NoiseDraw(key, node.kind(), module_path(node.scopeName(), scope_prefix),
                                     source_of(node), drawn[key]))
    return out


class DrawRecorder(torch.fx.Interpreter):
    """Runs a program's graph module and keeps what each draw returned, by node name."""

    def __init__(self, module: torch.fx.GraphModule) -> None:
        super().__init__(module)
        self.drawn: dict[str, torch.Tensor] = {}

    def run_node(self, n: torch.fx.Node) -> Any:
        out = super().run_node(n)
        if n.op == "call_function" and is_sampling_target(n.target) and isinstance(out, torch.Tensor):
            self.drawn[n.name] = out.detach().clone()
        return out


def is_sampling_target(target: Any) -> bool:
    """Whether an FX node's target is a drawing aten op."""
    schema = getattr(target, "_schema", None)
    return schema is not None and str(schema.name) in SAMPLING_KINDS


def program_draws(program: torch.export.ExportedProgram, drawn: Mapping[str, torch.Tensor]) -> list[NoiseDraw]:
    """The draws of an exported program in graph order, with the values a run of its
    module drew (``drawn``: node name → tensor)."""
    from t2n.frontend.export.context import fx_module_path, fx_source

    out = []
    for node in program.graph.nodes:
        if node.op == "call_function" and is_sampling_target(node.target) and node.name in drawn:
            kind = str(node.target._schema.name)  # type: ignore[union-attr]
            out.append(NoiseDraw(node.name, kind, fx_module_path(node), fx_source(node), drawn[node.name]))
    return out


def has_draws(program: torch.export.ExportedProgram) -> bool:
    return any(n.op == "call_function" and is_sampling_target(n.target) for n in program.graph.nodes)


def named_draws(draws: Sequence[NoiseDraw], taken: Sequence[str]) -> list[NoiseDraw]:
    """The draws with their input names, ``noise_<i>`` (``_1``, ``_2``... added when a
    name is taken by an input or output of the model)."""
    used = set(taken)
    out = []
    for i, d in enumerate(draws):
        name, k = f"noise_{i}", 1
        while name in used:
            name, k = f"noise_{i}_{k}", k + 1
        used.add(name)
        out.append(attrs.evolve(d, name=name))
    return out


def ops_error(problems: Sequence[OpProblem]) -> UnsupportedOpsError:
    """The error listing ``problems``: a :class:`~t2n.errors.SamplingOpsError` when every
    one is a random draw refused under ``sampling="refuse"`` (its advice is to change
    that), else an :class:`~t2n.errors.UnsupportedOpsError`."""
    if problems and all(p.reason == REFUSAL.format(op=p.op) for p in problems):
        return SamplingOpsError(problems)
    return UnsupportedOpsError(problems)
