"""Passes over the IR and the manager that runs them."""

from t2n.passes.base import Pass, PassResult
from t2n.passes.constant_folding import ConstantFolding
from t2n.passes.dead_node_elimination import DeadNodeElimination
from t2n.passes.manager import PassManager
from t2n.passes.pipeline import DEFAULT_PIPELINE, builtin_passes, compile_pipeline, parse_pipeline
from t2n.passes.spec import PipelineSpec

__all__ = ["DEFAULT_PIPELINE", "ConstantFolding", "DeadNodeElimination", "Pass", "PassManager", "PassResult",
           "PipelineSpec", "builtin_passes", "compile_pipeline", "parse_pipeline"]
