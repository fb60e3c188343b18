"""Boundary passes: they reshape a graph's interface for the application that runs it and
leave its inside as it is. Each is one :class:`~t2n.passes.base.Pass`; a remodel plan
(:mod:`t2n.remodel`) composes them in this order: check ``original_shape``, collapse input
axes, bind scalars, collapse output axes, keep outputs, fix ``eval_symbols``, rename
symbols, add extensions, prune assertions."""

from t2n.passes.remodel.bind_scalar import BindScalarToDimSize
from t2n.passes.remodel.collapse_inputs import CollapseInputDims
from t2n.passes.remodel.collapse_outputs import CollapseOutputDims
from t2n.passes.remodel.eval_symbols import EvalSymbols
from t2n.passes.remodel.extensions import AddExtensions
from t2n.passes.remodel.original_shape import CheckOriginalShape
from t2n.passes.remodel.outputs_keep import KeepOutputs
from t2n.passes.remodel.prune_assertions import PruneAssertions
from t2n.passes.remodel.rename_symbols import RenameSymbols
from t2n.passes.remodel.symbols import substitute_symbols

__all__ = ["AddExtensions", "BindScalarToDimSize", "CheckOriginalShape", "CollapseInputDims", "CollapseOutputDims",
           "EvalSymbols", "KeepOutputs", "PruneAssertions", "RenameSymbols", "substitute_symbols"]
