"""Greedy generation with an encoder-decoder export in tract's Python package: the
encoder once, then the decoder on the start tokens (a prefill, ``P == 0``) and one token
per call, the self-attention cache tract returned fed back (or kept in one tract state
for the stateful form); the cross-attention keys and values the encoder returned are
fed to every call. The next token is chosen by the rules of ``seq2seq.json``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import numpy as np
import numpy.typing as npt

from t2n.errors import InvalidArgumentError
from t2n.llm.common.generate import as_numpy
from t2n.llm.seq2seq.manifest import Manifest
from t2n.llm.seq2seq.rules import check_prompt

if TYPE_CHECKING:
    import tract


@attrs.frozen
class Decoded:
    """What a generation gave: the new ``tokens`` (the end token included when it came),
    the ``prompt`` fed before them, and the logits of each decoder call (``[vocab]``, the
    call's last position)."""

    tokens: list[int]
    prompt: list[int]
    logits: list[np.ndarray]


def _numpy(values: Sequence[object]) -> list[np.ndarray]:
    import tract

    from t2n.backends.tract.child import numpy_of

    return [np.asarray(numpy_of(tract, np, v)) for v in values]


class Seq2SeqRunner:
    """The two artifacts of an export folder loaded in tract, with its manifest."""

    def __init__(self, export_dir: str | Path) -> None:
        from t2n.llm.common.generate import load_runnable

        self.manifest = Manifest.read(export_dir)
        self.encoder: tract.Runnable = load_runnable(self.manifest.encoder_path)
        self.decoder: tract.Runnable = load_runnable(self.manifest.decoder_path)

    def encode(self, inputs: Mapping[str, npt.ArrayLike]) -> dict[str, np.ndarray]:
        """The decoder inputs the encoder computes for ``inputs`` (by decoder input name)."""
        spec = self.manifest.encoder_inputs[0]
        array = _encoder_input(inputs, spec.name, np.dtype(spec.dtype))
        names = [o.name for o in self.manifest.encoder_outputs]
        outputs = dict(zip(names, _numpy(self.encoder.run([array]))))
        return {fed: outputs[out] for out, fed in self.manifest.feeds.items()}

    def generate(self, inputs: Mapping[str, npt.ArrayLike], max_new_tokens: int) -> Decoded:
        """Greedy tokens after the prompt (``inputs["decoder_input_ids"]``, else the manifest's)."""
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
            raise InvalidArgumentError(f"max_new_tokens must be an int >= 1, got {max_new_tokens!r}")
        rules = self.manifest.rules
        prompt = _prompt(inputs, rules.prompt)
        check_prompt(prompt, self.manifest.max_positions, max_new_tokens)
        step = _Steps(self, self.encode(inputs))
        tokens, logits = list(prompt), []
        ids = np.asarray([prompt], dtype=np.int64)
        for _ in range(max_new_tokens):
            logits.append(step(ids)[0, -1])
            token = rules.next_token(logits[-1], len(tokens), len(prompt), len(prompt) + max_new_tokens)
            tokens.append(token)
            if token in rules.eos:
                break
            ids = np.asarray([[token]], dtype=np.int64)
        return Decoded(tokens[len(prompt):], list(prompt), logits)


class _Steps:
    """One decoder call after another: the explicit cache fed back, or one tract state."""

    def __init__(self, runner: Seq2SeqRunner, cross: dict[str, np.ndarray]) -> None:
        manifest = runner.manifest
        self.names = [i.name for i in manifest.decoder_inputs]
        self.outputs = [o.name for o in manifest.decoder_outputs]
        self.known = dict(cross)
        self.pairs: dict[str, str] = {}
        """Cache output → the input it is fed back to (none for tract's stateful cache)."""
        if manifest.stateful:
            self.run = runner.decoder.spawn_state().run
            return
        self.run = runner.decoder.run
        cache = manifest.cache
        self.pairs = {o: i for i, o in cache.pairs}
        for name in self.pairs.values():
            self.known[name] = np.zeros((1, cache.heads, 0, cache.head_dim), dtype=np.dtype(cache.dtype))

    def __call__(self, ids: np.ndarray) -> np.ndarray:
        """The logits of one call on ``ids``; the cache it returns is kept for the next."""
        results = dict(zip(self.outputs, _numpy(self.run([ids if n == "input_ids" else self.known[n]
                                                          for n in self.names]))))
        for out, name in self.pairs.items():
            self.known[name] = results[out]
        return results[self.outputs[0]]


def _encoder_input(inputs: Mapping[str, npt.ArrayLike], name: str, dtype: np.dtype) -> np.ndarray:
    """The encoder's input of a tokenizer's or processor's output (one sequence, no padding)."""
    if name not in inputs:
        raise InvalidArgumentError(f"the encoder takes {name!r}; the inputs hold {sorted(inputs)}")
    array = np.asarray(as_numpy(inputs[name]), dtype=dtype)
    if array.ndim < 2 or array.shape[0] != 1:
        raise InvalidArgumentError(f"{name} must hold one sequence (batch 1), got shape {list(array.shape)}")
    mask = inputs.get("attention_mask")
    if name == "input_ids" and mask is not None and not np.all(np.asarray(as_numpy(mask)) == 1):
        raise InvalidArgumentError("attention_mask masks some tokens: the exported encoder takes one sequence "
                                   "without padding; pass its tokens alone")
    return array


def _prompt(inputs: Mapping[str, npt.ArrayLike], default: Sequence[int]) -> list[int]:
    given = inputs.get("decoder_input_ids")
    if given is None:
        return list(default)
    array = np.asarray(as_numpy(given), dtype=np.int64).reshape(-1)
    if array.size == 0:
        raise InvalidArgumentError("decoder_input_ids is empty: give the decoder's start tokens, or leave it out")
    return [int(t) for t in array]


def generate(export_dir: str | Path, inputs: Mapping[str, npt.ArrayLike], max_new_tokens: int) -> list[int]:
    """The token ids tract's greedy generation gives after the decoder's start tokens
    (the end token included when it came), for ``inputs`` as a tokenizer or processor
    returns them (``input_ids`` / ``attention_mask``, or ``input_features``; numpy or
    torch; batch 1). ``inputs["decoder_input_ids"]`` replaces the manifest's start tokens
    (Whisper's language and task tokens, a forced prefix)."""
    return Seq2SeqRunner(export_dir).generate(inputs, max_new_tokens).tokens
