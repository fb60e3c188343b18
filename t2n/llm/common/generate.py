"""Greedy generation with an exported LLM in tract's Python package: a prefill of the
prompt (``P == 0``), then one token at a time (``S == 1``) with the cache fed back.
This is how the tests prove an artifact generates what ``transformers`` generates."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import tract


def load_runnable(path: str | Path) -> tract.Runnable:
    """tract's runnable of an LLM artifact, with the transformers operations."""
    import tract

    loader = tract.nnef()
    for extra in ("with_tract_core", "with_tract_transformers"):  # reified LLM ops
        if hasattr(loader, extra):
            loader = getattr(loader, extra)()
    return loader.load(str(path)).into_runnable()


def tract_greedy_generate(artifact_path: str | Path, prompt_ids: npt.ArrayLike, max_new_tokens: int, *,
                          cache_shape: tuple[int, ...] | None = None,
                          cache_dtype: npt.DTypeLike = np.float32) -> list[int]:
    """The ``max_new_tokens`` token ids tract's greedy choice gives after ``prompt_ids``
    (``[1, S]``), with the explicit cache fed back or tract's stateful cache (one
    state). ``artifact_path`` is ``OUT/model/model.nnef.tgz`` or ``OUT`` (then the
    cache shape and dtype are read from ``OUT/modes.json``); ``cache_shape`` is
    ``(kv_heads, head_dim)`` otherwise (``(kv_heads, key_dim, value_dim)`` when the values'
    last size differs)."""
    import json

    import tract

    from t2n.backends.tract.child import numpy_of

    path = Path(artifact_path)
    empty: list[np.ndarray] | None = None
    one_token = False
    if path.is_dir():
        modes = json.loads((path / "modes.json").read_text())
        one_token = modes["cache"].get("tokens_per_call") == 1  # tract's window cache
        cache_shape = (modes["cache"]["kv_heads"], modes["cache"]["head_dim"],
                       modes["cache"].get("value_head_dim", modes["cache"]["head_dim"]))
        cache_dtype = np.dtype(modes["cache"]["dtype"])
        if "empty" in modes["cache"]:  # a hybrid model: keys, values and recurrent states
            empty = [np.zeros(e["shape"], dtype=e["dtype"]) for e in modes["cache"]["empty"].values()]
        path = path / "model" / "model.nnef.tgz"
    runnable = load_runnable(path)
    ids = np.asarray(prompt_ids, dtype=np.int64).reshape(1, -1)
    if runnable.input_count() == 1:  # tract's stateful cache: the state keeps it
        state = runnable.spawn_state()
        if one_token:  # the prompt one token per call
            for i in range(ids.shape[1] - 1):
                state.run([ids[:, i:i + 1]])
            ids = ids[:, -1:]
        return greedy_ids(lambda x: [numpy_of(tract, np, state.run([x])[0])], ids, max_new_tokens)
    if cache_shape is None:
        raise ValueError("cache_shape=(kv_heads, head_dim) is needed when artifact_path is a file")
    layers = (runnable.input_count() - 1) // 2
    dims = (cache_shape[1], cache_shape[-1])
    cache = empty if empty is not None else [np.zeros((1, cache_shape[0], 0, dim), dtype=cache_dtype)
                                             for _ in range(layers) for dim in dims]

    def step(x: np.ndarray) -> list[np.ndarray]:
        nonlocal cache
        outputs = [numpy_of(tract, np, o) for o in runnable.run([x, *cache])]
        cache = outputs[1:]
        return outputs

    return greedy_ids(step, ids, max_new_tokens)


def greedy_ids(step: Callable[[np.ndarray], list[np.ndarray]], ids: np.ndarray, count: int) -> list[int]:
    tokens: list[int] = []
    for _ in range(count):
        token = int(step(ids)[0][0, -1].argmax())
        tokens.append(token)
        ids = np.array([[token]], dtype=np.int64)
    return tokens


def as_numpy(value: object) -> np.ndarray:
    """A processor's or tokenizer's value as numpy: a torch tensor (detached, on the CPU)
    or anything numpy takes."""
    detach = getattr(value, "detach", None)
    return np.asarray(detach().cpu().numpy() if callable(detach) else value)
