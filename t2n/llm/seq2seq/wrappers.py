"""The two modules traced for an encoder-decoder export, each calling the model's own
code: the encoder (and, once, the projection of its states into every decoder layer's
cross-attention keys and values), and one decoder step over explicit caches.

In ``transformers`` 5, an ``EncoderDecoderCache`` whose cross-attention layers hold keys
and values is marked as updated when it is built, and each family's cross-attention then
reads them instead of projecting the encoder states again (``is_updated`` in BART, Marian,
mBART, Pegasus, M2M100, Whisper and T5 attention): the decoder graph never sees the
encoder states, only the projected keys and values the encoder graph returned."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from t2n.llm.common.cache_api import cache_keyword
from t2n.llm.seq2seq.layout import Seq2SeqLayout

if TYPE_CHECKING:
    import transformers


def _cache(pairs: list[tuple[torch.Tensor, torch.Tensor]]) -> Any:
    """A ``DynamicCache`` holding ``pairs`` (none: layers made as they are updated)."""
    from transformers import DynamicCache

    return DynamicCache(ddp_cache_data=pairs) if pairs else DynamicCache()


def _pairs(flat: tuple[torch.Tensor, ...]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [(flat[2 * i], flat[2 * i + 1]) for i in range(len(flat) // 2)]


class EncoderWrapper(torch.nn.Module):
    """``forward(x)`` → ``(encoder states, cross key 0, cross value 0, ...)``: the model's
    encoder on ``x`` (token ids or audio features, passed as ``input_name``), then its
    decoder run once on any token so that each layer's cross-attention projects the states
    into its cache with the model's own code; the rest of that decoder call reaches no
    output and is dropped from the graph."""

    def __init__(self, model: transformers.PreTrainedModel, input_name: str) -> None:
        super().__init__()
        self.model = model
        self.input_name = input_name

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        from transformers import EncoderDecoderCache

        model: Any = self.model
        states = model.get_encoder()(**{self.input_name: x}).last_hidden_state
        decoder = model.get_decoder()
        cache: Any = EncoderDecoderCache(_cache([]), _cache([]))
        ids = torch.zeros((x.shape[0], 1), dtype=torch.long, device=x.device)
        decoder(input_ids=ids, encoder_hidden_states=states, use_cache=True, **{cache_keyword(decoder): cache})
        cross: list[torch.Tensor] = []
        for layer in cache.cross_attention_cache.layers:
            cross += [layer.keys, layer.values]
        return (states, *cross)


class DecoderWrapper(torch.nn.Module):
    """``forward(input_ids, k_0, v_0, ..., ck_0, cv_0, ...)`` → ``(logits of the last
    position, k_0', v_0', ...)``: one call of the model's own forward with a cache made of
    the ``layers`` self-attention pairs (past length ``P``) and the cross-attention pairs
    the encoder graph returned. The encoder states it is given are a stand-in of zeros:
    the cross-attention reads the projected keys and values, never the states."""

    def __init__(self, model: transformers.PreTrainedModel, layers: int) -> None:
        super().__init__()
        self.model = model
        self.layers = layers
        self.hidden = int(model.config.d_model)

    def forward(self, input_ids: torch.Tensor, *caches: torch.Tensor) -> tuple[torch.Tensor, ...]:
        from transformers import EncoderDecoderCache
        from transformers.modeling_outputs import BaseModelOutput

        own, cross = caches[:2 * self.layers], caches[2 * self.layers:]
        cache: Any = EncoderDecoderCache(_cache(_pairs(own)), _cache(_pairs(cross)))
        stand_in = cross[0].new_zeros((input_ids.shape[0], cross[0].shape[2], self.hidden))
        out = self.model(decoder_input_ids=input_ids, encoder_outputs=BaseModelOutput(last_hidden_state=stand_in),
                         use_cache=True, **{cache_keyword(self.model): cache})
        grown: list[torch.Tensor] = []
        for layer in cache.self_attention_cache.layers:
            grown += [layer.keys, layer.values]
        return (out.logits[:, -1:], *grown)


def read_layout(model: transformers.PreTrainedModel, input_name: str, example: torch.Tensor) -> Seq2SeqLayout:
    """The layout of ``model``'s caches, read off one real step of its own forward on
    ``example`` (whatever its config calls heads and sizes)."""
    from t2n.llm.common.cache_api import returned_cache

    start = torch.zeros((1, 1), dtype=torch.long)
    with torch.no_grad():
        out = model(**{input_name: example}, decoder_input_ids=start, use_cache=True)
    cache: Any = returned_cache(out)
    own, cross = cache.self_attention_cache.layers, cache.cross_attention_cache.layers
    keys, cross_keys = own[0].keys, cross[0].keys
    return Seq2SeqLayout(len(own), int(keys.shape[1]), int(keys.shape[3]), int(cross_keys.shape[1]),
                         int(cross_keys.shape[3]), keys.dtype, input_name)
