"""An exported decoder checked against ``transformers``' own model, never against the
wrapper t2n traced: the artifact runs in tract as a runtime runs it (a prefill, then one
token per call with its own cache fed back, or in one tract state), and each call's
logits are compared with the model's forward on the whole sequence without a cache
(:mod:`t2n.reference.causal_lm`)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from t2n.check.compare import Tolerance
from t2n.llm.common.layout import CacheLayout
from t2n.reference.causal_lm import Call, calls, check_logits, token_ids

if TYPE_CHECKING:
    import torch

LOG = logging.getLogger(__name__)


def chained_logits(path: Path, ids: np.ndarray, steps: Sequence[Call], carried: Sequence[np.ndarray], *,
                   stateful: bool, media: Sequence[np.ndarray] = ()) -> list[np.ndarray]:
    """Each call's logits from the artifact at ``path`` in tract, run as a runtime runs it:
    the call's tokens, then ``carried`` (the explicit cache, a rotary shift; each call's
    outputs after the logits are fed to the next), then ``media`` with the first call (the
    encoder's rows; empty rows after). ``stateful``: the calls share one tract state."""
    import tract

    from t2n.backends.tract.child import numpy_of
    from t2n.llm.common.generate import load_runnable

    runnable = load_runnable(path)
    runner = runnable.spawn_state() if stateful else runnable
    none = [np.zeros((0, *m.shape[1:]), dtype=m.dtype) for m in media]
    out = []
    for k, step in enumerate(steps):
        inputs = [ids[:, step.start:step.end], *carried, *(media if k == 0 else none)]
        results = [np.asarray(numpy_of(tract, np, o)) for o in runner.run([np.asarray(x) for x in inputs])]
        out.append(results[0])
        carried = results[1:]
    return out


def artifact_logits(path: Path, layout: CacheLayout, ids: np.ndarray, steps: Sequence[Call], *,
                    keep: int | None, one_token: bool = False) -> list[np.ndarray]:
    """The logits the artifact at ``path`` gives for each call of ``steps`` in tract:
    explicit cache fed back, or tract's stateful cache in one state (``one_token``: a
    window cache, fed one token per call, the last ``keep`` positions' logits kept)."""
    from t2n.llm.common.samples import to_numpy
    from t2n.llm.common.stateful import run_steps

    if not one_token:
        empty = [] if layout.stateful else [to_numpy(t) for t in layout.empty_cache(0)]
        return chained_logits(path, ids, steps, empty, stateful=layout.stateful)
    got = run_steps(str(path), [[ids[:, s.start:s.end]] for s in steps], one_token=one_token)
    lengths = [min(s.end - s.start, keep) if keep else s.end - s.start for s in steps]
    return [g[:, g.shape[1] - n:] for g, n in zip(got, lengths)]


def verify_against_transformers(path: Path, model: torch.nn.Module, layout: CacheLayout, vocab: int,
                                tolerance: Tolerance | str, *, keep: int | None, one_token: bool = False,
                                note: str = "") -> None:
    """Refuse (:class:`~t2n.errors.CheckMismatchError`) an artifact whose calls do not give
    ``model``'s logits on the whole sequence (a prefill, then one-token calls)."""
    steps = calls()
    ids = token_ids(vocab, steps[-1].end)
    LOG.info("checking the artifact in tract against %s's own forward (no cache): a prefill and %d "
             "one-token calls", type(model).__name__, len(steps) - 1)
    got = artifact_logits(path, layout, ids, steps, keep=keep, one_token=one_token)
    check_logits(model, ids, steps, got, tolerance, keep=keep, artifact=str(path), note=note)
