"""An encoder-decoder export checked as a runtime uses it, against ``transformers``' own
model (:mod:`t2n.reference.seq2seq`), never against the modules t2n traced: the
artifacts generate greedily in tract from a sample source, and

- each decoder call's logits must be the model's forward on the source and the decoder
  sequence so far without a cache (within the tolerance);
- the tokens must be those ``model.generate`` gives (greedy, the same start tokens).

A gap raises :class:`~t2n.errors.CheckMismatchError` naming the call and the position."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from t2n.check.compare import OutputReport, Tolerance, compare_one
from t2n.errors import CheckMismatchError
from t2n.llm.seq2seq.families import Family
from t2n.llm.seq2seq.rules import greedy_overrides
from t2n.llm.seq2seq.runner import Decoded, Seq2SeqRunner
from t2n.reference.seq2seq import generated_tokens, sequence_logits

if TYPE_CHECKING:
    import torch
    import transformers

LOG = logging.getLogger(__name__)

CHECK_TOKENS = 8
"""New tokens the export's check generates."""

SOURCE_LENGTH = 7
"""Tokens of the sample source of a text model (audio: the one length Whisper takes)."""


def _call_name(k: int) -> str:
    return "prefill" if k == 0 else "decode" if k == 1 else f"decode_{k}"


def _logit_reports(decoded: Decoded, expected: np.ndarray, tol: Tolerance) -> list[OutputReport]:
    """Each call's logits against the reference row of its last position."""
    first = len(decoded.prompt) - 1
    return [compare_one(f"logits ({_call_name(k)})", got[None], expected[first + k][None], tol)
            for k, got in enumerate(decoded.logits)]


def _mismatch(artifact: Path, model: torch.nn.Module, what: str, reports: list[OutputReport]) -> CheckMismatchError:
    lines = "\n".join(f"  {r}" for r in reports)
    return CheckMismatchError(
        f"{artifact} does not generate what {type(model).__name__} computes: {what}.\n{lines}\n"
        "The export is not written: what t2n traced (its encoder and decoder wrappers, the caches they "
        "build) computes otherwise than the model does (a transformers release t2n does not follow "
        "yet?); report the model and the transformers version", reports)


def verify_seq2seq(out: Path, model: transformers.PreTrainedModel, family: Family, tolerance: Tolerance | str) -> None:
    """Refuse the export in ``out`` unless tract generates, from a sample source, the
    logits and the tokens of ``model`` (see the module)."""
    tol = Tolerance.parse(tolerance)
    source = family.example(model, SOURCE_LENGTH, seed=3)
    LOG.info("checking %s in tract against %s's own generate and forward (%d tokens)", out, type(model).__name__,
             CHECK_TOKENS)
    runner = Seq2SeqRunner(out)
    decoded = runner.generate({family.input_name: source.numpy()}, CHECK_TOKENS)
    expected = sequence_logits(model, family.input_name, source, decoded.prompt + decoded.tokens)
    reports = _logit_reports(decoded, expected, tol)
    bad = next((k for k, r in enumerate(reports) if not r.ok), None)
    if bad is not None:
        raise _mismatch(out, model, f"at the '{_call_name(bad)}' call (decoder position "
                        f"{len(decoded.prompt) - 1 + bad}) its logits are off by {reports[bad].max_abs:.3g} "
                        f"(tolerance '{tol.value}') from transformers' forward without a cache", reports)
    start, tokens = generated_tokens(model, family.input_name, source, decoded.prompt, CHECK_TOKENS,
                                     audio=family.audio, overrides=greedy_overrides(model.generation_config))
    got = decoded.tokens
    if family.audio and got and got[-1] in runner.manifest.rules.eos:  # Whisper's generate drops it
        got = got[:-1]
    if start != decoded.prompt or got != tokens:
        raise _mismatch(out, model, f"generate gives {start} + {tokens}, tract {decoded.prompt} + {got}", reports)
