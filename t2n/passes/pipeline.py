"""The default pass pipeline of ``compile``."""

from __future__ import annotations

from collections.abc import Sequence

from t2n.passes.base import Pass
from t2n.passes.constant_folding import ConstantFolding
from t2n.passes.dead_node_elimination import DeadNodeElimination
from t2n.passes.fold_batch_norm import FoldBatchNorm
from t2n.passes.manager import DumpFn, PassManager


def cleanup(verify_each: bool = False, dump: DumpFn | None = None) -> PassManager:
    """Dead-node elimination and constant folding to a fixed point."""
    return PassManager(
        [DeadNodeElimination(), ConstantFolding()], fixed_point=True,
        verify_each=verify_each, dump=dump, label="cleanup",
    )


def default_pipeline(
    *,
    before: Sequence[Pass] = (),
    user_passes: Sequence[Pass] = (),
    verify_each: bool = False,
    dump: DumpFn | None = None,
    fold_batch_norm: bool = True,
) -> PassManager:
    """``before`` (e.g. dynamic axes) → cleanup → batch-norm folding (unless turned
    off) → user passes → cleanup."""
    stages: list[Pass] = [*before, cleanup(verify_each, dump)]
    if fold_batch_norm:
        stages += [FoldBatchNorm(), cleanup(verify_each, dump)]
    if user_passes:
        stages += [
            PassManager(list(user_passes), verify_each=verify_each, dump=dump, label="user-passes"),
            cleanup(verify_each, dump),
        ]
    return PassManager(stages, verify_each=verify_each, dump=dump, label="compile")
