"""A multimodal export checked against the model's own forward, never against the
wrappers t2n traced: the encoder artifact runs in tract on an image (or audio clip), its
rows feed the decoder artifact's prefill of a prompt holding one placeholder per row,
then one-token calls follow with the decoder's cache fed back (or kept in one tract
state); each call's logits are compared with ``model(input_ids=..., pixel_values=...,
use_cache=False)`` on the whole sequence (:mod:`t2n.reference.causal_lm`)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import torch

from t2n.check.compare import Tolerance
from t2n.llm.multimodal.family import Family, ForwardInputs
from t2n.reference.causal_lm import Call, calls, check_logits

LOG = logging.getLogger(__name__)


class Written(Protocol):
    """An artifact the export wrote (:class:`t2n.llm.multimodal.export.Written`)."""

    @property
    def path(self) -> Path: ...
    @property
    def start(self) -> tuple[torch.Tensor, ...]: ...
    @property
    def graph_inputs(self) -> list[str] | None: ...

DECODE_CALLS = 3
"""One-token calls after the prefill."""


def encoder_rows(encoder: Written, example: tuple[torch.Tensor, ...]) -> list[np.ndarray]:
    """The encoder artifact's outputs in tract for ``example`` (rows, DeepStack streams,
    grid positions)."""
    import tract

    from t2n.backends.tract.child import numpy_of
    from t2n.llm.common.generate import load_runnable
    from t2n.llm.common.samples import to_numpy

    outputs = load_runnable(encoder.path).run([to_numpy(t) for t in example])
    return [np.asarray(numpy_of(tract, np, o)) for o in outputs]


def prompt_ids(model: torch.nn.Module, placeholder: int, rows: int, decode: int) -> np.ndarray:
    """``[1, T]``: a text token, one placeholder per row, two text tokens, then the
    ``decode`` tokens fed one per call (teacher-forced; below the placeholder's id)."""
    vocab = int(model.get_input_embeddings().weight.shape[0])  # type: ignore[operator]
    text = torch.randint(0, min(vocab, placeholder), (3 + decode,), generator=torch.Generator().manual_seed(11))
    return torch.cat([text[:1], torch.full((rows,), placeholder), text[1:]]).unsqueeze(0).numpy()


def decoder_logits(decoder: Written, ids: np.ndarray, steps: Sequence[Call], media: list[np.ndarray]
                   ) -> list[np.ndarray]:
    """The decoder artifact's logits for each call: the prefill with ``media`` (the
    encoder's outputs), the one-token calls with none; the cache (explicit) and the rotary
    shift fed back from each call's outputs, or the cache kept in one tract state."""
    from t2n.llm.common.samples import to_numpy
    from t2n.llm.common.verify import chained_logits

    carried = [to_numpy(t) for t in decoder.start]
    if decoder.graph_inputs is not None:  # the graph keeps the cache: only the rotary shift (if any) is fed back
        carried = carried[len(carried) - (len(decoder.graph_inputs) - 1 - len(media)):]
    return chained_logits(decoder.path, ids, steps, carried, stateful=decoder.graph_inputs is not None, media=media)


def _with_media(forward_inputs: ForwardInputs, model: torch.nn.Module,
                example: tuple[torch.Tensor, ...], size: tuple[int, int] | None, prompt: int | None,
                prefix: torch.Tensor) -> dict[str, torch.Tensor]:
    """The model's keywords for ``example`` beside the sequence ``prefix``; for a prefix-LM
    (``prompt``: the prompt's length) its ``token_type_ids``, 0 for the prompt and 1 for the
    tokens after it, as generation extends the processor's."""
    given = forward_inputs(model, example, prefix, size)
    if prompt is not None:
        given["token_type_ids"] = (torch.arange(prefix.shape[1]) >= prompt).long().unsqueeze(0)
    return given


def verify_multimodal(model: torch.nn.Module, family: Family, checks: Sequence[tuple[Written, tuple[int, int] | None]],
                      decoder: Written, tolerance: Tolerance | str, *, placeholder: int, keep: int | None) -> None:
    """For each (encoder, image size) of ``checks``: the encoder and the decoder in tract on
    the family's example input of that size against ``model``'s forward
    (:class:`~t2n.errors.CheckMismatchError` naming the call, the position and the gap)."""
    assert family.forward_inputs is not None
    forward_inputs = family.forward_inputs
    for encoder, size in checks:
        example = family.example(model, size) if family.default_size is not None else family.example(model)
        media = encoder_rows(encoder, example)
        rows = int(media[0].shape[0])
        steps = calls(prompt=rows + 3, decode=DECODE_CALLS)
        ids = prompt_ids(model, placeholder, rows, DECODE_CALLS)
        LOG.info("checking %s and the decoder in tract against %s's own forward%s", encoder.path,
                 type(model).__name__, f" on a {size[0]} x {size[1]} image" if size else "")
        got = decoder_logits(decoder, ids, steps, media)
        check_logits(model, ids, steps, got, tolerance, keep=keep, artifact=f"{encoder.path} with {decoder.path}",
                     inputs=functools.partial(_with_media, forward_inputs, model, example, size,
                                              steps[0].end if family.prefix_lm else None))
