"""A causal language model's reference: ``transformers``' own forward on the whole
token sequence, without a cache (``model(input_ids=..., use_cache=False)``), for each
call a runtime makes to an exported decoder (a prefill of the prompt, then one token at
a time with the cache fed back).

A cache that the export's wrapper builds or feeds wrongly (a wrong position offset, a
state not carried, a library release that renamed the cache argument) makes the
artifact's later calls leave these logits, whatever the traced wrapper computed."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np
import torch

from t2n.check.compare import OutputReport, Tolerance, compare_one
from t2n.errors import CheckMismatchError

PROMPT_TOKENS = 4
"""Tokens of the prompt the check feeds (the prefill call)."""

DECODE_CALLS = 4
"""One-token calls after the prefill, each with the cache the artifact returned."""


@attrs.frozen
class Call:
    """One call of the artifact: the sequence's tokens ``[start, end)``, the cache holding
    the ``start`` tokens before them."""

    name: str
    start: int
    end: int


def calls(prompt: int = PROMPT_TOKENS, decode: int = DECODE_CALLS) -> list[Call]:
    """A prefill of ``prompt`` tokens, then ``decode`` calls of one token."""
    steps = [Call("prefill", 0, prompt)]
    for k in range(decode):
        steps.append(Call("decode" if k == 0 else f"decode_{k + 1}", prompt + k, prompt + k + 1))
    return steps


def token_ids(vocab: int, length: int, seed: int = 7) -> np.ndarray:
    """``[1, length]`` token ids the check feeds (teacher-forced: any tokens serve)."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (1, length), generator=generator).numpy()


def _logits(out: Any) -> torch.Tensor:
    logits: torch.Tensor = out.logits if hasattr(out, "logits") else out[0]
    return logits.detach()


Inputs = Callable[[torch.Tensor], dict[str, Any]]
"""The keywords beside ``input_ids`` the model's forward takes for a prompt (pixel values,
audio features, ...): a function of the ``input_ids`` of the call."""


def reference_logits(model: torch.nn.Module, ids: np.ndarray, steps: Sequence[Call], keep: int | None,
                     inputs: Inputs | None = None) -> list[np.ndarray]:
    """For each call, the logits ``model`` gives on the whole sequence up to the call's
    last token with no cache (and the ``inputs`` of that sequence), at the call's positions
    (its last ``keep`` of them)."""
    out = []
    with torch.no_grad():
        for step in steps:
            prefix = torch.as_tensor(ids[:, :step.end])
            extra = inputs(prefix) if inputs is not None else {}
            logits = _logits(model(input_ids=prefix, use_cache=False, **extra))
            rows = logits[:, step.start:step.end]
            if keep:
                rows = rows[:, max(0, rows.shape[1] - keep):]
            out.append((rows.half() if rows.dtype == torch.bfloat16 else rows).numpy())
    return out


def _worst_position(got: np.ndarray, ref: np.ndarray, step: Call) -> int:
    """The sequence position of the call's largest gap."""
    if got.shape != ref.shape or got.ndim < 2 or got.shape[1] == 0:
        return step.end - 1
    gap = np.abs(got.astype(np.float64) - ref.astype(np.float64))
    gap = np.nan_to_num(gap, nan=np.inf).reshape(gap.shape[0], gap.shape[1], -1).max(axis=(0, 2))
    return int(step.end - got.shape[1] + int(gap.argmax()))


def check_logits(model: torch.nn.Module, ids: np.ndarray, steps: Sequence[Call], got: Sequence[np.ndarray],
                 tolerance: Tolerance | str, *, keep: int | None, artifact: str,
                 inputs: Inputs | None = None, note: str = "") -> list[OutputReport]:
    """Compare ``got`` (the artifact's logits for each call of ``steps`` over ``ids``, in
    its engine) with :func:`reference_logits`; :class:`~t2n.errors.CheckMismatchError`
    naming the first call that differs, its position in the sequence and the gap (and
    ``note``: what the export found that explains it, such as weights that are not finite)."""
    tol = Tolerance.parse(tolerance)
    expected = reference_logits(model, ids, steps, keep, inputs)
    reports = [compare_one(f"logits ({s.name})", g, r, tol) for s, g, r in zip(steps, got, expected)]
    for step, report, g, r in zip(steps, reports, got, expected):
        if report.ok:
            continue
        position = _worst_position(np.asarray(g), r, step)
        lines = "\n".join(f"  {r}" for r in reports)
        raise CheckMismatchError(
            f"{artifact} does not generate what {type(model).__name__} computes: at the '{step.name}' call "
            f"(tokens {step.start}..{step.end - 1} after a cache of {step.start}), position {position} of the "
            f"sequence, its logits are off by {report.max_abs:.3g} (tolerance '{tol.value}') from "
            f"transformers' forward on the whole sequence without a cache.\n{lines}{note}\n"
            "The export is not written: what t2n traced (its wrapper of the model: the cache, the encoders' "
            "rows at the placeholders) computes otherwise than the model does (a transformers release t2n "
            "does not follow yet?); report the model and the transformers version", reports)
    return reports
