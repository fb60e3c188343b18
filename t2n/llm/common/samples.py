"""The sample inputs and PyTorch outputs written beside an LLM artifact (``OUT/tests/``):
a greedy generation run in PyTorch, step by step, exactly as a runtime feeds the graph
(a prefill of the prompt with an empty cache, then one token at a time with the cache
fed back), so any engine can replay it and compare.

- ``tests/prefill.npz`` and ``tests/decode.npz``: the first two steps, arrays under the
  graph's input and output names;
- ``tests/io.npz``: every step in one file, under ``STEP/inputs/NAME`` and
  ``STEP/outputs/NAME`` (steps ``prefill``, ``decode``, ``decode_2``, ... in order) and
  the whole token sequence under ``tokens`` (see :mod:`t2n.check.io_npz`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import torch

from t2n.check.io_npz import IOStep, write_io_npz
from t2n.errors import InvalidArgumentError
from t2n.llm.common.layout import CacheLayout

LOG = logging.getLogger(__name__)

PROMPT_LENGTH = 4
"""Length of the sample prompt (``tests/prefill.npz``)."""

DEFAULT_TOTAL = PROMPT_LENGTH + 2
"""Tokens in the default sample generation: the prompt, then one decode step."""


def check_total_size(total: object) -> None:
    """``sample_generation_total_size``: tokens in the sample (prompt + generated); at
    least ``PROMPT_LENGTH + 2`` so that it holds a decode step."""
    if total is None:
        return
    if isinstance(total, bool) or not isinstance(total, int) or total < DEFAULT_TOTAL:
        raise InvalidArgumentError(
            f"sample_generation_total_size must be an int >= {DEFAULT_TOTAL} (a {PROMPT_LENGTH}-token "
            f"prompt, then at least one decode step), got {total!r}")


def to_numpy(t: torch.Tensor) -> np.ndarray:
    t = t.detach()
    return (t.half() if t.dtype == torch.bfloat16 else t).numpy()  # bf16 is written as f16


def generate_steps(wrapper: torch.nn.Module, layout: CacheLayout, vocab: int, total: int) -> tuple[
        list[IOStep], list[int]]:
    """The steps of a greedy generation of ``total`` tokens (prompt included) through
    ``wrapper`` (the traced module), and the token sequence."""
    prompt = torch.randint(0, vocab, (1, PROMPT_LENGTH), generator=torch.Generator().manual_seed(0))
    names_in, names_out = layout.input_names(), layout.output_names()
    tokens = [int(t) for t in prompt[0]]
    ids, past = prompt, layout.empty_cache(0)
    steps: list[IOStep] = []
    with torch.no_grad():
        while True:
            outputs = wrapper(ids, *past)
            name = "prefill" if not steps else "decode" if len(steps) == 1 else f"decode_{len(steps)}"
            steps.append(IOStep(name, {n: to_numpy(t) for n, t in zip(names_in, [ids, *past])},
                                {n: to_numpy(t) for n, t in zip(names_out, outputs)}))
            tokens.append(int(outputs[0][0, -1].float().argmax()))
            if len(tokens) >= total:
                return steps, tokens
            ids, past = torch.tensor([[tokens[-1]]]), list(outputs[1:])


def write_samples(wrapper: torch.nn.Module, layout: CacheLayout, vocab: int, out: Path,
                  total: int | None = None) -> list[IOStep]:
    """``tests/prefill.npz``, ``tests/decode.npz`` and ``tests/io.npz`` (see the module);
    returns the steps. With a stateful cache the npz files hold ``input_ids`` and
    ``outputs`` only (decode runs after prefill in the same tract state) and ``io.npz``
    is not written: its steps are replayed one by one, each with its cache."""
    total = DEFAULT_TOTAL if total is None else total
    LOG.info("generating %d sample tokens in PyTorch", total)
    steps, tokens = generate_steps(wrapper, layout, vocab, total)
    (out / "tests").mkdir(exist_ok=True)
    kept = set(layout.graph_input_names()) | set(layout.graph_output_names())
    for step in steps[:2]:
        arrays: dict[str, Any] = {n: a for n, a in {**step.inputs, **step.outputs}.items() if n in kept}
        np.savez(out / "tests" / f"{step.name}.npz", **arrays)
    if not layout.stateful:
        write_io_npz(out / "tests" / "io.npz", steps, tokens=np.asarray([tokens], dtype=np.int64))
    return steps
