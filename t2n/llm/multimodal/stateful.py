"""A multimodal decoder with tract's stateful KV cache (``kv_cache="stateful"``,
``"stateful_int8"``, ``"stateful_int4"``): the explicit-cache decoder rewritten by
:class:`~t2n.llm.stateful.StatefulKVCache`, so that it takes ``input_ids`` and the
encoder's outputs (the embedding rows of this call's placeholder tokens) and returns
the logits, tract keeping the keys and values in its state (the rewrite is
:func:`~t2n.llm.stateful.make_stateful`'s; here: the refusal, and the check of the
samples' steps, whose inputs include the encoder's rows).

The Qwens are refused: their 3-D rotary shift (``rope_delta``) is fed back from call to
call, and tract keeps as state only a cache that each call appends to."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from t2n.check.compare import Tolerance
from t2n.check.io_npz import IOStep
from t2n.errors import CheckMismatchError, InvalidArgumentError
from t2n.llm.multimodal.families import Family


def check_stateful(model: Any, family: Family, kv_cache: str) -> None:
    """``InvalidArgumentError`` for a stateful ``kv_cache`` of a family that feeds a
    value back that is not a cache (the Qwens' rotary shift)."""
    if kv_cache != "explicit" and family.grid is not None:
        raise InvalidArgumentError(
            f"kv_cache={kv_cache!r}: {type(model).__name__}'s decoder feeds back its 3-D rotary shift "
            "(rope_delta, the positions the images so far took) from call to call, and tract keeps as state "
            "only a cache each call appends to; export it with kv_cache='explicit'")


def run_stateful_steps(path: str, steps: Sequence[IOStep], input_names: Sequence[str]) -> list[np.ndarray]:
    """The logits tract gives for each step's inputs, the steps run one after the other in
    one state (the first with an empty cache)."""
    import tract

    from t2n.backends.tract.child import _to_numpy
    from t2n.llm.generate import load_runnable

    state = load_runnable(path).spawn_state()
    return [np.asarray(_to_numpy(tract, np, state.run([np.asarray(s.inputs[n]) for n in input_names])[0]))
            for s in steps]


def verify_stateful_decoder(path: str, steps: Sequence[IOStep], input_names: Sequence[str],
                            tolerance: Tolerance | str) -> None:
    """The samples' steps (a prefill with the encoder's rows, then decode steps) run in
    one tract state against PyTorch's logits: :class:`~t2n.errors.CheckMismatchError`
    with the report when they differ."""
    from t2n.check.compare import compare

    got = run_stateful_steps(path, steps, input_names)
    names = [f"outputs ({s.name})" for s in steps]
    report = compare("tract (stateful cache)", names, got, [s.outputs["outputs"] for s in steps], tolerance)
    if not report.ok:
        raise CheckMismatchError(f"{report}\nThe stateful decoder at {path} does not compute what PyTorch "
                                 "computes; export with kv_cache='explicit' and report the model", report)
