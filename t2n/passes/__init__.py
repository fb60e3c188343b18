"""Passes over the IR and the manager that runs them."""

from t2n.passes.base import Pass, PassResult
from t2n.passes.constant_folding import ConstantFolding
from t2n.passes.dead_node_elimination import DeadNodeElimination
from t2n.passes.manager import PassManager

__all__ = ["ConstantFolding", "DeadNodeElimination", "Pass", "PassManager", "PassResult"]
