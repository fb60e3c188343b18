"""An encoder-decoder model's reference, through ``transformers``' public API only:
``model.generate`` (greedy) for the tokens, and the model's forward on the whole decoder
sequence without a cache for each position's logits. Never the modules t2n traces."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

if TYPE_CHECKING:
    import transformers


def encoder_kwargs(input_name: str, encoder_input: torch.Tensor) -> dict[str, torch.Tensor]:
    """The keywords of the source (an all-ones attention mask beside token ids)."""
    if input_name == "input_ids":
        return {"input_ids": encoder_input, "attention_mask": torch.ones_like(encoder_input)}
    return {input_name: encoder_input}


def generated_tokens(model: transformers.PreTrainedModel, input_name: str, encoder_input: torch.Tensor,
                     prompt: Sequence[int], count: int, *, audio: bool, overrides: Mapping[str, object]
                     ) -> tuple[list[int], list[int]]:
    """(the decoder's start tokens, then the new tokens) of ``model.generate``, greedy,
    ``count`` new tokens at most. Whisper is given ``prompt`` as its ``decoder_input_ids``
    and returns only the new tokens without a final end token; the other families start
    from their own start token, returned first. ``overrides``: generation settings
    (greedy, and the rules the artifact's loop does not apply turned off)."""
    kwargs = encoder_kwargs(input_name, encoder_input)
    if audio:
        kwargs["decoder_input_ids"] = torch.tensor([list(prompt)], dtype=torch.long)
    generating: Any = model
    with torch.no_grad():
        out = generating.generate(**kwargs, max_new_tokens=count, **overrides)
    ids = [int(t) for t in out[0]]
    return (list(prompt), ids) if audio else (ids[:len(prompt)], ids[len(prompt):])


def sequence_logits(model: transformers.PreTrainedModel, input_name: str, encoder_input: torch.Tensor,
                    decoder_ids: Sequence[int]) -> np.ndarray:
    """The logits ``[len(decoder_ids), vocab]`` of the model's forward on the source and
    the whole decoder sequence, without a cache."""
    ids = torch.tensor([list(decoder_ids)], dtype=torch.long)
    with torch.no_grad():
        out = model(**encoder_kwargs(input_name, encoder_input), decoder_input_ids=ids, use_cache=False)
    logits: torch.Tensor = out.logits[0]
    return (logits.half() if logits.dtype == torch.bfloat16 else logits).numpy()
