"""The sample inputs and PyTorch outputs written beside multimodal artifacts, so any
engine can replay them (``t2n check ARTIFACT --io FILE``) as for text models:

- ``OUT/<modality>/tests/io.npz``: the encoder on its example input (one step, ``encode``);
- ``OUT/decoder/tests/prefill.npz``, ``decode.npz`` and ``io.npz``: a greedy generation
  through the decoder as a runtime feeds it: a prefill of a prompt holding one
  placeholder token per row of the encoder's sample output (those rows as
  ``in_<modality>_embeddings``), then one token at a time with no rows and the cache
  (and the rotary shift) fed back."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import torch

from t2n.check.io_npz import IOStep, write_io_npz
from t2n.llm.common.samples import to_numpy

LOG = logging.getLogger(__name__)

DECODE_STEPS = 2
"""Tokens generated after the prefill in the decoder's sample."""


def write_encoder_samples(encoder: torch.nn.Module, example: tuple[torch.Tensor, ...], input_names: list[str],
                          output_names: list[str], folder: Path) -> tuple[torch.Tensor, ...]:
    """``folder/tests/io.npz`` of the encoder; returns its outputs (rows, DeepStack streams)."""
    with torch.no_grad():
        outputs = encoder(*example)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    (folder / "tests").mkdir(exist_ok=True)
    step = IOStep("encode", {n: to_numpy(t) for n, t in zip(input_names, example)},
                  {n: to_numpy(t) for n, t in zip(output_names, outputs)})
    write_io_npz(folder / "tests" / "io.npz", [step])
    return outputs


def write_decoder_samples(decoder: torch.nn.Module, placeholder: int, vocab: int, start: list[torch.Tensor],
                          rows: tuple[torch.Tensor, ...], input_names: list[str], output_names: list[str],
                          folder: Path, kept: list[str] | None = None) -> tuple[list[str], list[IOStep]]:
    """``folder/tests/{prefill,decode,io}.npz`` of the decoder (see the module); ``start``
    the empty cache (and the zero rotary shift), ``rows`` the encoder's sample outputs.
    ``kept``: a stateful decoder's graph inputs and outputs, the only arrays its npz files
    hold (decode runs after prefill in the same tract state; no ``io.npz``, whose steps
    are replayed one by one). Returns the files' paths relative to ``folder`` and the steps."""
    generator = torch.Generator().manual_seed(0)
    text = torch.randint(0, min(vocab, placeholder), (3,), generator=generator)
    prompt = torch.cat([text[:1], torch.full((rows[0].shape[0],), placeholder), text[1:]]).unsqueeze(0)
    dtype = start[0].dtype
    given = tuple(r.to(dtype) if r.is_floating_point() else r for r in rows)  # grid positions stay int64
    none = tuple(torch.zeros((0, r.shape[1]), dtype=r.dtype) for r in given)
    ids, past = prompt, list(start)
    tokens = [int(t) for t in prompt[0]]
    steps: list[IOStep] = []
    LOG.info("generating %d sample tokens in PyTorch after a prompt with %d placeholders", DECODE_STEPS,
             rows[0].shape[0])
    with torch.no_grad():
        for i in range(DECODE_STEPS):
            inputs = (ids, *past, *(given if i == 0 else none))
            outputs = decoder(*inputs)
            name = "prefill" if i == 0 else "decode" if i == 1 else f"decode_{i}"
            steps.append(IOStep(name, {n: to_numpy(t) for n, t in zip(input_names, inputs)},
                                {n: to_numpy(t) for n, t in zip(output_names, outputs)}))
            tokens.append(int(outputs[0][0, -1].float().argmax()))
            ids, past = torch.tensor([[tokens[-1]]]), list(outputs[1:])
    (folder / "tests").mkdir(exist_ok=True)
    names = None if kept is None else set(kept)
    for step in steps[:2]:
        arrays: dict[str, Any] = {n: a for n, a in {**step.inputs, **step.outputs}.items()
                                  if names is None or n in names}
        np.savez(folder / "tests" / f"{step.name}.npz", **arrays)
    if kept is not None:
        return ["tests/prefill.npz", "tests/decode.npz"], steps
    write_io_npz(folder / "tests" / "io.npz", steps, tokens=np.asarray([tokens], dtype=np.int64))
    return ["tests/prefill.npz", "tests/decode.npz", "tests/io.npz"], steps
