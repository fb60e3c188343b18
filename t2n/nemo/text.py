"""The text of label ids as NeMo's decoding writes it (the text of ``transcribe()``).

NeMo turns the ids of a hypothesis into text in two steps (``decode_hypothesis`` of its
CTC and RNN-T decoding objects):

* the pieces are joined: a character model's labels end to end; a SentencePiece model's
  pieces by SentencePiece's own decoder (``decode_pieces``): ``▁`` is a space, kept at the
  end; the leading ``▁`` of the text is dropped (``add_dummy_prefix``; with
  ``remove_extra_whitespaces``, that of every piece until the text starts); ``<unk>``
  prints as the model's ``unk_surface`` (`` ⁇ ``); control pieces (``<s>``, ``</s>``)
  print nothing; runs of byte pieces (``<0xE2>``) are UTF-8, each invalid byte U+FFFD;
* one whitespace before a punctuation mark of the vocabulary is removed
  (``supported_punctuation``).

The export records what this needs in the manifest (``decoding.text``, see
:func:`text_facts`); :class:`Detokenizer` applies it without NeMo or SentencePiece.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from t2n.errors import InvalidArgumentError, NemoManifestError

SPACE = "\u2581"
"""SentencePiece's whitespace symbol (``▁``)."""

UNK_SURFACE = " \u2047 "
"""SentencePiece's default text of ``<unk>``: `` ⁇ ``."""

LEADING_SPACE = ("first", "each", "keep")
"""How the leading ``▁`` of a SentencePiece text is dropped: that of the first piece
(``add_dummy_prefix``), that of every piece until the text starts
(``remove_extra_whitespaces``), or none."""

_BYTE = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


@attrs.frozen
class Detokenizer:
    """Label ids to text, by the rules a manifest's ``decoding.text`` records."""

    vocabulary: tuple[str, ...]
    blank_id: int
    tokenizer: str = "chars"
    """``chars``, ``sentencepiece``, or the class name of a tokenizer t2n does not follow."""
    control: frozenset[int] = frozenset()
    unknown: frozenset[int] = frozenset()
    byte: frozenset[int] = frozenset()
    literal: frozenset[int] = frozenset()
    """Ids printed as they are (a legacy NeMo tokenizer's special tokens)."""
    unk_surface: str = UNK_SURFACE
    leading_space: str = "first"
    punctuation: tuple[str, ...] = ()
    reason: str = ""
    """Why a tokenizer is not followed."""

    @classmethod
    def from_decoding(cls, decoding: Mapping[str, Any]) -> Detokenizer:
        """The detokenizer of a manifest's ``decoding`` section (for one written before
        ``decoding.text`` existed: the vocabulary's pieces, by their names)."""
        vocabulary = tuple(str(v) for v in decoding["vocabulary"])
        facts = decoding.get("text") or _guessed_facts(vocabulary)
        pieces = facts.get("pieces") or {}
        leading = str(facts.get("leading_space", "first"))
        if leading not in LEADING_SPACE:
            raise NemoManifestError(f"decoding.text.leading_space is {leading!r}; expected one of "
                                    f"{', '.join(LEADING_SPACE)}")
        kinds = {k: frozenset(int(i) for i in pieces.get(k, ())) for k in ("control", "unknown", "byte", "literal")}
        return cls(vocabulary, int(decoding["blank_id"]), str(facts.get("tokenizer", "chars")),
                   control=kinds["control"], unknown=kinds["unknown"], byte=kinds["byte"], literal=kinds["literal"],
                   unk_surface=str(facts.get("unk_surface", UNK_SURFACE)), leading_space=leading,
                   punctuation=tuple(str(p) for p in facts.get("punctuation", ())),
                   reason=str(facts.get("reason", "")))

    def text(self, ids: Iterable[int]) -> str:
        """The text NeMo's decoding gives for ``ids`` (blanks, if any, dropped as NeMo does)."""
        labels = [int(i) for i in ids]
        bad = sorted({i for i in labels if not 0 <= i < len(self.vocabulary) and i != self.blank_id})
        if bad:
            raise InvalidArgumentError(f"label ids {', '.join(map(str, bad[:5]))} are not in the vocabulary "
                                       f"(ids 0 to {len(self.vocabulary) - 1}, blank {self.blank_id})")
        labels = [i for i in labels if i != self.blank_id]
        if self.tokenizer == "chars":
            text = "".join(self.vocabulary[i] for i in labels)
        elif self.tokenizer == "sentencepiece":
            text = self._sentencepiece(labels)
        else:
            raise NemoManifestError(
                f"this export's tokenizer ({self.tokenizer}) is not one t2n turns into text"
                + (f" ({self.reason})" if self.reason else "")
                + ": its label ids are NeMo's; give them to the model's own tokenizer")
        return _space_before_punctuation(self.punctuation).sub(r"\2", text) if self.punctuation else text

    def _sentencepiece(self, ids: Sequence[int]) -> str:
        """SentencePiece's ``Decode`` of the pieces of ``ids`` (its decoder, step by step)."""
        text = ""
        pending = bytearray()
        expect_leading = True
        consumed_leading = False
        for i in ids:
            piece = self.vocabulary[i]
            if i in self.byte:
                pending.append(int(piece[3:5], 16))
                continue
            text += _utf8(bytes(pending))
            pending.clear()
            if consumed_leading or text:
                expect_leading = False
            consumed_leading = False
            if i in self.control:
                continue
            if i in self.unknown:
                text += self.unk_surface
            elif i in self.literal:
                text += piece
            else:
                if expect_leading and self.leading_space != "keep" and piece.startswith(SPACE):
                    piece = piece[len(SPACE):]
                    consumed_leading = self.leading_space == "first"
                text += piece.replace(SPACE, " ")
        return text + _utf8(bytes(pending))


def _space_before_punctuation(punctuation: Sequence[str]) -> re.Pattern[str]:
    marks = sorted(punctuation, key=lambda p: (-len(p), p))
    return re.compile(r"(\s)(" + "|".join(re.escape(p) for p in marks) + ")")


def _utf8(data: bytes) -> str:
    """Bytes as UTF-8 text, each byte that starts no valid character as U+FFFD."""
    out = []
    at = 0
    while at < len(data):
        lead = data[at]
        size = 1 if lead < 0x80 else 2 if 0xC2 <= lead <= 0xDF else 3 if 0xE0 <= lead <= 0xEF else \
            4 if 0xF0 <= lead <= 0xF4 else 0
        try:
            out.append(data[at:at + size].decode("utf-8") if size else "\ufffd")
        except UnicodeDecodeError:
            size = 0
            out.append("\ufffd")
        at += max(size, 1)
    return "".join(out)


def _guessed_facts(vocabulary: Sequence[str]) -> dict[str, Any]:
    """The text facts of a manifest written before they were recorded: a vocabulary of
    ``▁`` pieces is SentencePiece's (its special pieces known by their usual names)."""
    if not any(v.startswith(SPACE) for v in vocabulary):
        return {"tokenizer": "chars"}
    return {"tokenizer": "sentencepiece", "leading_space": "first",
            "pieces": {"control": [i for i, v in enumerate(vocabulary) if v in ("<s>", "</s>", "<pad>")],
                       "unknown": [i for i, v in enumerate(vocabulary) if v == "<unk>"],
                       "byte": [i for i, v in enumerate(vocabulary) if _BYTE.match(v)]}}


# -- at export: what NeMo's model does ------------------------------------------------------


def text_facts(model: Any, vocabulary: Sequence[str]) -> dict[str, Any]:
    """What the manifest records to write the text of ``model``'s label ids as its
    decoding does: the tokenizer's kind, the ids of its special pieces, and the
    punctuation before which a space is dropped. A tokenizer t2n does not follow is
    named, with why (its ids stay exact)."""
    decoding = getattr(model, "decoding", None)
    punctuation = sorted(str(p) for p in (getattr(decoding, "supported_punctuation", None) or ()))
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is None:
        return {"tokenizer": "chars", "punctuation": punctuation}
    name = type(tokenizer).__name__
    processor: Any = getattr(tokenizer, "tokenizer", None)
    if name != "SentencePieceTokenizer" or not hasattr(processor, "serialized_model_proto"):
        return {"tokenizer": name, "reason": "only character and SentencePiece vocabularies are",
                "punctuation": punctuation}
    try:
        from sentencepiece import sentencepiece_model_pb2
    except ImportError as exc:  # protobuf missing or too new for the generated module
        return {"tokenizer": name, "reason": f"sentencepiece's model format could not be read here: {exc}",
                "punctuation": punctuation}
    proto = sentencepiece_model_pb2.ModelProto()  # type: ignore[attr-defined]
    proto.ParseFromString(processor.serialized_model_proto())
    size = int(processor.get_piece_size())
    if proto.denormalizer_spec.precompiled_charsmap or proto.trainer_spec.treat_whitespace_as_suffix:
        return {"tokenizer": name, "punctuation": punctuation,
                "reason": "its SentencePiece model denormalizes its text or puts spaces after the pieces"}
    if [str(v) for v in vocabulary[:size]] != [processor.id_to_piece(i) for i in range(size)]:
        return {"tokenizer": name, "punctuation": punctuation,
                "reason": "the model's vocabulary is not its SentencePiece model's pieces in order"}
    spec = proto.normalizer_spec
    leading = "each" if spec.remove_extra_whitespaces else "first" if spec.add_dummy_prefix else "keep"
    kinds = {"control": processor.is_control, "unknown": processor.is_unknown, "byte": processor.is_byte}
    pieces = {k: [i for i in range(size) if test(i)] for k, test in kinds.items()}
    pieces["literal"] = list(range(size, len(vocabulary)))
    unk = str(proto.trainer_spec.unk_surface) if proto.trainer_spec.HasField("unk_surface") else UNK_SURFACE
    return {"tokenizer": "sentencepiece", "leading_space": leading, "unk_surface": unk,
            "pieces": {k: v for k, v in pieces.items() if v}, "punctuation": punctuation}
