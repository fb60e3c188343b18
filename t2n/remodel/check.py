"""Running a remodelled model and the model it came from on the same data: the inputs of
the new interface, turned into the old one's (collapsed axes put back, bound scalars set
to their size), and the old outputs turned into the new ones (kept, collapsed). Used by
``t2n remodel --check`` and the tests, in the real engine."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import attrs
import numpy as np

from t2n.check.compare import CheckReport, Tolerance, compare
from t2n.ir import DType
from t2n.ir.dims import parse_dim
from t2n.passes.base import Pass
from t2n.passes.remodel import BindScalarToDimSize, CollapseInputDims, CollapseOutputDims
from t2n.remodel.interface import Interface, IOInfo


@attrs.frozen
class IOMap:
    before: Interface
    after: Interface
    bound: Mapping[str, tuple[str, int]]
    collapsed_inputs: Mapping[str, tuple[int, ...]]
    collapsed_outputs: Mapping[str, tuple[int, ...]]

    @classmethod
    def of(cls, passes: Sequence[Pass], before: Interface, after: Interface) -> IOMap:
        ranks_in = {i.name: len(i.shape) for i in before.inputs}
        ranks_out = {o.name: len(o.shape) for o in before.outputs}
        bound, cin, cout = {}, {}, {}
        for p in passes:
            if isinstance(p, CollapseInputDims):
                cin[p.input] = tuple(sorted(a % ranks_in[p.input] for a in p.axes))
            elif isinstance(p, BindScalarToDimSize):
                # the pass's axis counts without the source's collapsed axes
                kept = [a for a in range(ranks_in[p.source]) if a not in cin.get(p.source, ())]
                bound[p.input] = (p.source, kept[p.axis % len(kept)])
            elif isinstance(p, CollapseOutputDims):
                cout[p.output] = tuple(sorted(a % ranks_out[p.output] for a in p.axes))
        return cls(before, after, bound, cin, cout)

    def original_inputs(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """The inputs of the model before the plan, for ``inputs`` of the model after it."""
        given = dict(zip((i.name for i in self.after.inputs), inputs))
        out: dict[str, np.ndarray] = {}
        for info in self.before.inputs:
            if info.name in given:
                x = given[info.name]
                for a in self.collapsed_inputs.get(info.name, ()):
                    x = np.expand_dims(x, a)
                out[info.name] = x
        for name, (source, axis) in self.bound.items():
            info = next(i for i in self.before.inputs if i.name == name)
            shape = tuple(d if isinstance(d, int) else 1 for d in info.shape)  # one element: symbols are 1
            out[name] = np.full(shape, out[source].shape[axis]).astype(DType(info.dtype).numpy)
        return [out[i.name] for i in self.before.inputs]

    def expected_outputs(self, outputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """The outputs of the model after the plan, from those of the model before it."""
        by_name = dict(zip((o.name for o in self.before.outputs), outputs))
        out = []
        for info in self.after.outputs:
            y = by_name[info.name]
            axes = self.collapsed_outputs.get(info.name, ())
            out.append(np.squeeze(y, axes) if axes else y)
        return out


def shape_at(info: IOInfo, sizes: Mapping[str, int]) -> tuple[int, ...]:
    """The concrete shape of ``info`` with its symbols at ``sizes``."""
    out = []
    for d in info.shape:
        dim = d if isinstance(d, int) else parse_dim(d)
        out.append(int(dim) if isinstance(dim, int) else dim.evaluate(sizes))
    return tuple(out)


def sample_inputs(interface: Interface, sizes: Mapping[str, int], seed: int = 0) -> list[np.ndarray]:
    """Inputs of ``interface`` with its symbols at ``sizes``: normal floats, integer zeros
    (valid indices for any table), false booleans."""
    rng = np.random.default_rng(seed)
    out = []
    for info in interface.inputs:
        dt = DType(info.dtype)
        shape = shape_at(info, sizes)
        if dt.is_float:
            out.append(rng.standard_normal(shape).astype(dt.numpy))
        else:
            out.append(np.zeros(shape, dtype=dt.numpy))
    return out


def compare_runs(io: IOMap, run_before: Callable[[list[np.ndarray]], Sequence[np.ndarray]],
                 run_after: Callable[[list[np.ndarray]], Sequence[np.ndarray]], sizes: Mapping[str, int],
                 tolerance: Tolerance | str = Tolerance.APPROXIMATE, seed: int = 0) -> CheckReport:
    """Run the model after the plan on sample inputs at ``sizes`` and the model before it
    on the same data; compare the outputs."""
    ins = sample_inputs(io.after, sizes, seed)
    expected = io.expected_outputs(run_before(io.original_inputs(ins)))
    got = list(run_after(ins))
    return compare("engine", [o.name for o in io.after.outputs], got, expected, Tolerance.parse(tolerance))
