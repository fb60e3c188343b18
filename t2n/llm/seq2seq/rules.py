"""The greedy choice of the next token, as ``transformers``' ``generate`` makes it for a
model's generation config: the decoder's start (prompt) tokens, the end-of-sequence
tokens, and the logits processors that mask tokens (forced first and last tokens,
suppressed tokens, a minimum length). They are written in the manifest so that any
runtime applies them; the settings a greedy loop does not apply (beam search,
repetition penalties, n-gram blocking) are listed there as ``not_applied``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import attrs
import numpy as np

from t2n.errors import InvalidArgumentError

if TYPE_CHECKING:
    import transformers

NEUTRAL: dict[str, object] = {
    "num_beams": 1, "do_sample": False, "no_repeat_ngram_size": 0, "encoder_no_repeat_ngram_size": 0,
    "repetition_penalty": 1.0, "encoder_repetition_penalty": 1.0, "sequence_bias": None,
    "exponential_decay_length_penalty": None, "guidance_scale": None, "penalty_alpha": None,
    "return_timestamps": False,
}
"""Generation settings the greedy loop does not apply, with the value that turns each off
(the check calls ``generate`` with these values; ``None`` counts as off too)."""


def _ids(value: object) -> tuple[int, ...]:
    """An id, a list of ids, or None as a tuple of ints."""
    if isinstance(value, int):
        return (value,)
    return tuple(int(v) for v in _items(value) if isinstance(v, int))


@attrs.frozen
class GenerationRules:
    """How the next token is chosen after ``prompt`` (the decoder's start tokens)."""

    prompt: tuple[int, ...]
    eos: tuple[int, ...] = ()
    forced_bos: int | None = None
    forced_eos: tuple[int, ...] = ()
    suppress: tuple[int, ...] = ()
    """Never chosen (``suppress_tokens`` and the one-token ``bad_words_ids``)."""
    begin_suppress: tuple[int, ...] = ()
    """Not chosen as the first token after the prompt (after the forced first token)."""
    min_length: int = 0
    min_new_tokens: int = 0
    not_applied: tuple[str, ...] = ()

    def next_token(self, logits: np.ndarray, length: int, prompt_length: int, max_length: int) -> int:
        """The token chosen from the last position's ``logits`` (``[vocab]``) when the
        decoder sequence holds ``length`` tokens, ``prompt_length`` of them the prompt, and
        may grow to ``max_length``: transformers' processors in its order, then argmax."""
        scores = np.asarray(logits, dtype=np.float64).copy()
        eos = list(self.eos)
        if eos and (length < self.min_length or length - prompt_length < self.min_new_tokens):
            scores[eos] = -np.inf
        if self.forced_bos is not None and length == 1:
            scores = _only(scores, [self.forced_bos])
        if self.forced_eos and length == max_length - 1:
            scores = _only(scores, list(self.forced_eos))
        scores[list(self.suppress)] = -np.inf
        begin = prompt_length + (1 if prompt_length == 1 and self.forced_bos is not None else 0)
        if length == begin:
            scores[list(self.begin_suppress)] = -np.inf
        return int(scores.argmax())

    def to_json(self) -> dict[str, object]:
        return {"prompt_token_ids": list(self.prompt), "eos_token_ids": list(self.eos),
                "forced_bos_token_id": self.forced_bos, "forced_eos_token_ids": list(self.forced_eos),
                "suppress_tokens": list(self.suppress), "begin_suppress_tokens": list(self.begin_suppress),
                "min_length": self.min_length, "min_new_tokens": self.min_new_tokens,
                "not_applied": list(self.not_applied)}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> GenerationRules:
        """The rules of a manifest's ``generation`` entry (:meth:`to_json`)."""
        bos = data.get("forced_bos_token_id")
        return cls(_ids(data["prompt_token_ids"]), _ids(data["eos_token_ids"]),
                   bos if isinstance(bos, int) else None, _ids(data.get("forced_eos_token_ids")),
                   _ids(data.get("suppress_tokens")), _ids(data.get("begin_suppress_tokens")),
                   _count(data.get("min_length")), _count(data.get("min_new_tokens")),
                   tuple(str(s) for s in _items(data.get("not_applied"))))


def _items(value: object) -> list[object]:
    """A JSON array's items (none for anything else)."""
    return list(value) if isinstance(value, (list, tuple)) else []


def _count(value: object) -> int:
    return value if isinstance(value, int) else 0


def _only(scores: np.ndarray, keep: list[int]) -> np.ndarray:
    """Every score -inf but ``keep``'s, which become 0 (a forced token)."""
    out = np.full_like(scores, -np.inf)
    out[keep] = 0.0
    return out


def rules_of(model: transformers.PreTrainedModel, audio: bool) -> GenerationRules:
    """The rules of ``model``'s generation config (Whisper: its prompt of start, language,
    task and no-timestamps tokens, :func:`whisper_prompt`)."""
    config = model.generation_config
    eos = _ids(config.eos_token_id)
    bad = [tuple(b) for b in (config.bad_words_ids or [])]
    single = tuple(b[0] for b in bad if len(b) == 1 and b[0] not in eos)
    skipped = [f"{name}={value!r}" for name, value in _active(config).items()]
    if any(len(b) > 1 for b in bad):
        skipped.append("bad_words_ids of several tokens")
    return GenerationRules(
        prompt=whisper_prompt(config) if audio else (start_token(model),), eos=eos,
        forced_bos=config.forced_bos_token_id, forced_eos=_ids(config.forced_eos_token_id),
        suppress=_ids(config.suppress_tokens) + single, begin_suppress=_ids(config.begin_suppress_tokens),
        min_length=int(config.min_length or 0), min_new_tokens=int(config.min_new_tokens or 0),
        not_applied=tuple(skipped))


def _active(config: transformers.GenerationConfig) -> dict[str, object]:
    """The settings of :data:`NEUTRAL` that ``config`` turns on."""
    values = {name: getattr(config, name, None) for name in NEUTRAL}
    return {name: value for name, value in values.items() if value is not None and value != NEUTRAL[name]}


def start_token(model: transformers.PreTrainedModel) -> int:
    """The decoder's first token, as ``generate`` picks it: the generation config's
    ``decoder_start_token_id``, else the model config's, else ``bos_token_id``."""
    for config in (model.generation_config, model.config):
        for name in ("decoder_start_token_id", "bos_token_id"):
            value = getattr(config, name, None)
            if isinstance(value, int):
                return value
    raise InvalidArgumentError(f"{type(model).__name__}'s configs name no decoder_start_token_id nor bos_token_id: "
                               "the decoder has no first token; set decoder_start_token_id in config.json")


def whisper_prompt(config: transformers.GenerationConfig) -> tuple[int, ...]:
    """Whisper's start tokens as its ``generate`` builds them (``_retrieve_init_tokens``):
    the start token, the forced ones of the config, the language (the config's; for a
    multilingual model without one, English or its first language, where transformers
    would detect it from the audio: pass ``decoder_input_ids`` to ``generate`` for
    another), the task (transcribe by default), then no-timestamps."""
    tokens: list[int | None] = [config.decoder_start_token_id]
    task, language = getattr(config, "task", None), getattr(config, "language", None)
    forced = getattr(config, "forced_decoder_ids", None) or []
    if task is None and language is None and forced and forced[0][0] == 1:
        tokens += [token for _, token in forced]
    languages: dict[str, int] = getattr(config, "lang_to_id", None) or {}
    undefined = len(tokens) <= 1 or tokens[1] is None
    if language is None and undefined and languages:
        language = "<|en|>" if "<|en|>" in languages else next(iter(languages))
    if language is not None:
        tokens = _with_language(tokens, _language_id(languages, str(language)))
    tokens = _with_task(tokens, config, task, language)
    no_timestamps = getattr(config, "no_timestamps_token_id", None)
    if no_timestamps is not None and tokens[-1] != no_timestamps:
        tokens.append(no_timestamps)
    return tuple(t for t in tokens if t is not None)


def _language_id(languages: Mapping[str, int], language: str) -> int:
    for key in (language, f"<|{language}|>", f"<|{language.lower()}|>"):
        if key in languages:
            return int(languages[key])
    raise InvalidArgumentError(f"the generation config's language {language!r} is not in its lang_to_id")


def _with_language(tokens: list[int | None], language: int) -> list[int | None]:
    return [tokens[0], language, *tokens[2:]] if len(tokens) > 1 else [*tokens, language]


def _with_task(tokens: list[int | None], config: transformers.GenerationConfig, task: str | None,
               language: object) -> list[int | None]:
    """The task token appended (a config's task; transcribe when a language is set and
    the prompt holds no task)."""
    tasks: dict[str, int] = getattr(config, "task_to_id", None) or {}
    if task is not None:
        return [*tokens, tasks[task]]
    if language is not None and tasks and not any(t in tasks.values() for t in tokens):
        return [*tokens, tasks["transcribe"]]
    return tokens


def greedy_overrides(config: transformers.GenerationConfig) -> dict[str, object]:
    """The keywords that make ``generate`` greedy with only the rules t2n applies (the
    settings of ``not_applied`` turned off)."""
    return {name: NEUTRAL[name] for name in _active(config)} | {"do_sample": False, "num_beams": 1}


def check_prompt(prompt: Sequence[int], limit: int | None, max_new_tokens: int) -> None:
    """Refuse a generation the decoder's positions cannot hold."""
    if limit is not None and len(prompt) + max_new_tokens > limit:
        raise InvalidArgumentError(
            f"{len(prompt)} start tokens and {max_new_tokens} new tokens pass the decoder's {limit} positions; "
            "ask for fewer tokens")
