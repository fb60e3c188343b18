"""``seq2seq.json``: what a runtime needs to generate with the two artifacts of an
encoder-decoder export, written once beside them and read back by
:func:`t2n.llm.seq2seq.runner`.

Format ``t2n-seq2seq/1``: each artifact's path and its inputs and outputs in graph
order (the order a runtime feeds and reads them by position) with shapes (ints and the
symbols ``T``, ``S``, ``P``) and dtypes; which encoder output feeds which decoder input;
the decoder's cache form and modes; the generation rules (start/prompt tokens, end
tokens, forced and suppressed tokens: :mod:`t2n.llm.seq2seq.rules`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from t2n.errors import InvalidArgumentError
from t2n.llm.seq2seq.layout import Seq2SeqLayout
from t2n.llm.seq2seq.rules import GenerationRules

if TYPE_CHECKING:
    from t2n.artifact import Artifact
    from t2n.ir import Value

MANIFEST = "seq2seq.json"
FORMAT = "t2n-seq2seq/1"
ENCODER_PATH = "encoder/model.nnef.tgz"
DECODER_PATH = "decoder/model.nnef.tgz"

SYMBOLS = {"T": "source positions: the encoder's tokens (fixed for audio features)",
           "S": "tokens given to this decoder call", "P": "tokens already in the decoder's self-attention cache"}
MODES = {"pp": {"assert": "P == 0", "description": "the start tokens, empty cache"},
         "tg": {"assert": "S == 1", "description": "one new token after P cached ones"}}
"""The decoder's named modes (``tract_assert NAME: ...``), as the decoder-only export's."""


def _spec(name: str, value: Value) -> dict[str, object]:
    return {"name": name, "shape": [d if isinstance(d, int) else str(d) for d in value.type.shape],
            "dtype": str(value.type.dtype.numpy)}


def graph_io(artifact: Artifact, feeds: Mapping[str, str] | None = None) -> dict[str, list[dict[str, object]]]:
    """An artifact's inputs and outputs in graph order; with ``feeds``, each output's
    ``feeds`` (the decoder input it is fed to, or None)."""
    graph = artifact.ir
    inputs = [_spec(n, v) for n, v in zip(artifact.input_names, graph.inputs)]
    outputs = [_spec(n, v) for n, v in zip(artifact.output_names, graph.outputs)]
    if feeds is not None:
        outputs = [{**o, "feeds": feeds.get(str(o["name"]))} for o in outputs]
    return {"inputs": inputs, "outputs": outputs}


def _cache(layout: Seq2SeqLayout) -> dict[str, object]:
    from t2n.llm.common.stateful import STATE_PREFIX

    cache: dict[str, object] = {
        "form": "stateful" if layout.stateful else "explicit", "num_layers": layout.layers,
        "heads": layout.heads, "head_dim": layout.head_dim, "dtype": str(layout.dtype).removeprefix("torch."),
        "shape": "[1, heads, P, head_dim] in, [1, heads, P + S, head_dim] out"}
    if layout.stateful:
        cache["states"] = [n.replace("in_cache", STATE_PREFIX, 1) for n in layout.cache_inputs()]
    else:
        cache["pairs"] = [list(p) for p in layout.cache_pairs()]
    return cache


def write_manifest(out: Path, model_type: str, architecture: str, layout: Seq2SeqLayout, encoder: Artifact,
                   decoder: Artifact, rules: GenerationRules, limit: int | None, extra: Mapping[str, object]) -> Path:
    """``OUT/seq2seq.json`` (see the module); ``limit``: the decoder's positions (``S + P``
    at most), ``extra``: more generation fields (Whisper's language and task tokens)."""
    manifest = {
        "format": FORMAT, "model_type": model_type, "architecture": architecture, "symbols": SYMBOLS,
        "encoder": {"path": ENCODER_PATH, **graph_io(encoder, layout.feeds())},
        "decoder": {"path": DECODER_PATH, **graph_io(decoder), "modes": MODES, "max_positions": limit,
                    "logits": "the last position's, [1, 1, vocab]", "cache": _cache(layout)},
        "feeds": layout.feeds(),
        "generation": {**rules.to_json(), **extra},
    }
    path = out / MANIFEST
    path.write_text(json.dumps(manifest, indent=2) + "\n")
    return path


@attrs.frozen
class IOSpec:
    """One input or output of an artifact: its name, shape (ints and symbols), dtype, and
    for an encoder output the decoder input it feeds."""

    name: str
    shape: tuple[int | str, ...]
    dtype: str
    feeds: str | None = None


@attrs.frozen
class CacheSpec:
    """The decoder's self-attention cache: ``form`` (``explicit``, ``stateful``), each
    tensor's heads, head size and dtype, and (explicit) the output fed back to each input."""

    form: str
    heads: int
    head_dim: int
    dtype: str
    pairs: tuple[tuple[str, str], ...] = ()


@attrs.frozen
class Manifest:
    """``seq2seq.json`` read back: the artifacts' paths and interfaces, the decoder's
    cache and positions, and the generation rules."""

    encoder_path: Path
    decoder_path: Path
    encoder_inputs: tuple[IOSpec, ...]
    encoder_outputs: tuple[IOSpec, ...]
    decoder_inputs: tuple[IOSpec, ...]
    decoder_outputs: tuple[IOSpec, ...]
    cache: CacheSpec
    rules: GenerationRules
    max_positions: int | None = None

    @classmethod
    def read(cls, folder: str | Path) -> Manifest:
        """``folder``'s manifest (``InvalidArgumentError`` when it has none of this format)."""
        path = Path(folder) / MANIFEST
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise InvalidArgumentError(f"{folder} holds no readable {MANIFEST} (an export_seq2seq folder?): "
                                       f"{exc}") from exc
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise InvalidArgumentError(f"{path} is not of format {FORMAT}")
        return _parse(Path(folder), data)

    @property
    def stateful(self) -> bool:
        return self.cache.form == "stateful"

    @property
    def feeds(self) -> dict[str, str]:
        """Encoder output → the decoder input it feeds."""
        return {o.name: o.feeds for o in self.encoder_outputs if o.feeds is not None}


def _specs(entries: list[dict[str, Any]]) -> tuple[IOSpec, ...]:
    return tuple(IOSpec(str(e["name"]), tuple(e["shape"]), str(e["dtype"]), e.get("feeds")) for e in entries)


def _parse(folder: Path, data: dict[str, Any]) -> Manifest:
    encoder, decoder = data["encoder"], data["decoder"]
    cache = decoder["cache"]
    limit = decoder.get("max_positions")
    return Manifest(
        folder / encoder["path"], folder / decoder["path"], _specs(encoder["inputs"]), _specs(encoder["outputs"]),
        _specs(decoder["inputs"]), _specs(decoder["outputs"]),
        CacheSpec(str(cache["form"]), int(cache["heads"]), int(cache["head_dim"]), str(cache["dtype"]),
                  tuple((str(i), str(o)) for i, o in cache.get("pairs", []))),
        GenerationRules.from_json(data["generation"]), int(limit) if limit is not None else None)
