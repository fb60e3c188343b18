"""Greedy generation with an exported multimodal model in tract's Python package: the
encoder turns the raw input (pixel values) into embedding rows, the decoder's prefill
takes them with the prompt (whose placeholder tokens they replace), then one token at a
time with no rows. This is how the tests prove the artifacts generate what
``transformers`` generates from the same pixel values."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt


def tract_encode(export_dir: str | Path, *raw: npt.ArrayLike, modality: str = "image",
                 image_size: tuple[int, int] | None = None) -> np.ndarray:
    """The encoder's embedding rows for ``raw`` (e.g. ``pixel_values``), run in tract."""
    return tract_encode_all(export_dir, *raw, modality=modality, image_size=image_size)[0]


def _objects(value: object) -> list[dict[str, object]]:
    """The JSON objects of a JSON array (none for anything else)."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def encoder_entry(manifest: Mapping[str, object], raw: Sequence[npt.ArrayLike], modality: str = "image",
                  image_size: tuple[int, int] | None = None) -> dict[str, object]:
    """The manifest's encoder for ``raw``: the one of ``image_size`` (height, width), else
    the only one of the modality, else the one whose ``image_size`` is the ``[..., H, W]``
    of 4-D pixel values (Qwen's flattened patches need ``image_size``)."""
    from t2n.errors import InvalidArgumentError

    entries = [e for e in _objects(manifest["encoders"]) if e["modality"] == modality]
    if image_size is not None:
        chosen = [e for e in entries if takes_size(e, (int(image_size[0]), int(image_size[1])))]
    elif len(entries) == 1:
        chosen = entries
    else:
        shape: tuple[int, ...] = tuple(np.shape(raw[0])) if raw else ()
        chosen = [e for e in entries if len(shape) == 4 and takes_size(e, (int(shape[-2]), int(shape[-1])))]
    if len(chosen) != 1:
        sizes = [e.get("image_size") for e in entries]
        raise InvalidArgumentError(f"no single {modality} encoder of this export takes this input "
                                   f"(image_size={image_size}); its sizes are {sizes}: pass image_size=(h, w)")
    return chosen[0]


def takes_size(entry: Mapping[str, object], size: tuple[int, int]) -> bool:
    """Whether a manifest's encoder takes images of ``size``: its ``image_size``, or any
    size within its ``image_size_bounds`` (an encoder of symbolic height and width)."""
    bounds = entry.get("image_size_bounds")
    if not isinstance(bounds, dict):
        return bool(entry.get("image_size") == list(size))
    return all(b["min"] <= side <= b["max"] and side % b["multiple_of"] == 0
               for side, b in zip(size, bounds.values()))


def tract_encode_all(export_dir: str | Path, *raw: npt.ArrayLike, modality: str = "image",
                     image_size: tuple[int, int] | None = None) -> list[np.ndarray]:
    """Every output of the encoder for ``raw`` (of ``image_size``: see :func:`encoder_entry`):
    the embedding rows, then the DeepStack streams of a Qwen3-VL, then each row's place in
    its image's grid (Qwen)."""
    import tract

    from t2n.backends.tract.child import numpy_of
    from t2n.llm.common.generate import load_runnable

    out = Path(export_dir)
    manifest = json.loads((out / "multimodal.json").read_text())
    entry = encoder_entry(manifest, raw, modality, image_size)
    runnable = load_runnable(out / str(entry["path"]))
    return [np.asarray(numpy_of(tract, np, o)) for o in runnable.run(_encoder_inputs(entry, raw))]


def _encoder_inputs(entry: Mapping[str, object], raw: Sequence[npt.ArrayLike]) -> list[np.ndarray]:
    """``raw`` as the encoder's graph takes it: one array per input of the manifest's entry
    (refused, naming the inputs, when some are missing), integers in the graph's integer
    type (a mask built by hand as int64 where the processor gives int32)."""
    from t2n.errors import InvalidArgumentError

    listed, graph = entry.get("inputs"), entry.get("graph")
    names = [str(n) for n in listed] if isinstance(listed, list) else []
    if names and len(raw) != len(names):
        raise InvalidArgumentError(
            f"the {entry.get('modality')} encoder takes {len(names)} input(s), {', '.join(names)}, in that order; "
            f"{len(raw)} given: pass each of them as the processor returns them")
    declared = _objects(graph.get("inputs")) if isinstance(graph, dict) else []
    arrays = [np.asarray(r) for r in raw]
    for i, spec in enumerate(declared[:len(arrays)]):
        wanted = np.dtype(str(spec["dtype"]))
        if arrays[i].dtype.kind in "iu" and wanted.kind in "iu" and arrays[i].dtype != wanted:
            arrays[i] = arrays[i].astype(wanted)
    return arrays


def tract_encode_images(export_dir: str | Path,
                        images: Sequence[tuple[npt.ArrayLike | tuple[npt.ArrayLike, ...], tuple[int, int] | None]],
                        modality: str = "image") -> list[np.ndarray]:
    """The encoder's outputs for several images (each its raw input, a tuple of arrays for
    an encoder of several inputs such as Qwen2-Audio's features and mask, and its size,
    None: picked as :func:`encoder_entry` picks), joined output by output in order: the rows
    of one call whose prompt holds the placeholders of these images one after the other."""
    encoded = [tract_encode_all(export_dir, *(raw if isinstance(raw, tuple) else (raw,)), modality=modality,
                                image_size=size) for raw, size in images]
    return [np.concatenate(parts, axis=0) for parts in zip(*encoded)]


class _Decoder:
    """The decoder of an export in tract, its cache (explicit: fed back; stateful: one
    tract state), and the inputs the encoder's outputs feed."""

    def __init__(self, export_dir: str | Path, modality: str = "image") -> None:
        from t2n.llm.common.generate import load_runnable

        out = Path(export_dir)
        manifest = json.loads((out / "multimodal.json").read_text())
        modes = json.loads((out / manifest["decoder"]["modes"]).read_text())
        self.dtype = np.dtype(modes["cache"]["dtype"])
        self.placeholder = int(modes["embeddings"]["placeholder_token_id"])
        self.runnable = load_runnable(out / manifest["decoder"]["path"])
        entry = next((e for e in manifest["encoders"] if e["modality"] == modality), manifest["encoders"][0])
        # the encoder's outputs in its order: the embeddings, the DeepStack streams, the grid positions
        outputs = [entry["outputs"][0], *entry.get("deepstack", []), *entry["outputs"][1:]]
        fed = {o["feeds"]: o for o in outputs}
        self.fed = [n for n in modes["inputs"] if n in fed]
        """The decoder inputs the encoder's outputs feed, in the decoder's order."""
        self.order = [next(i for i, o in enumerate(outputs) if o["feeds"] == n) for n in self.fed]
        self.empty = [np.zeros((0, int(fed[n]["shape"][1])),
                               dtype=self.dtype if fed[n]["dtype"] != "int64" else np.int64) for n in self.fed]
        delta = [np.zeros(1, dtype=np.int64)] if "rope_delta" in modes else []
        self.state = self.runnable.spawn_state() if modes["cache"]["form"] == "stateful" else None
        self.cache = delta if self.state is not None else [  # a stateful decoder: the Qwens' shift only
            np.zeros((1, modes["cache"]["kv_heads"], 0, modes["cache"]["head_dim"]), dtype=self.dtype)
            for _ in range(2 * int(modes["cache"]["num_layers"]))] + delta

    def rows(self, rows: list[np.ndarray] | None = None) -> list[np.ndarray]:
        """The encoder's outputs (in its order, None: no rows) as the decoder takes them."""
        if rows is None:
            return list(self.empty)
        return [rows[i].astype(e.dtype) for i, e in zip(self.order, self.empty)]

    def step(self, ids: np.ndarray, rows: list[np.ndarray] | None = None) -> list[np.ndarray]:
        """One call: ``rows`` the encoder's outputs for this call's placeholders (None: none);
        rows without as many placeholder tokens in ``ids`` are refused, as transformers
        refuses image features that do not match the image tokens."""
        import tract

        from t2n.backends.tract.child import numpy_of

        tokens = int((ids == self.placeholder).sum())
        if rows is not None and tokens != int(rows[0].shape[0]):
            from t2n.errors import InvalidArgumentError

            raise InvalidArgumentError(
                f"the prompt holds {tokens} placeholder token(s) (id {self.placeholder}) but the encoder gave "
                f"{int(rows[0].shape[0])} row(s): each row takes the place of one placeholder (the processor "
                "writes them); put the media's placeholders in the prompt")

        run = self.state.run if self.state is not None else self.runnable.run  # stateful: tract keeps the cache
        outputs = [numpy_of(tract, np, o) for o in run([ids, *self.cache, *self.rows(rows)])]
        self.cache = outputs[1:]
        return outputs


def tract_prefill_logits(export_dir: str | Path, prompt_ids: npt.ArrayLike, *raw: npt.ArrayLike,
                         modality: str = "image", image_size: tuple[int, int] | None = None,
                         rows: list[np.ndarray] | None = None) -> np.ndarray:
    """The decoder's logits (``[1, 1, vocab]``, ``[1, S, vocab]`` from an export with
    ``num_logits_to_keep=0``) for ``prompt_ids`` with the encoder's rows of
    ``raw`` (none: a text-only prompt) or the encoder outputs ``rows``, run in tract."""
    decoder = _Decoder(export_dir, modality)
    if rows is None and raw:
        rows = tract_encode_all(export_dir, *raw, modality=modality, image_size=image_size)
    return decoder.step(np.asarray(prompt_ids, dtype=np.int64).reshape(1, -1), rows)[0]


def tract_multimodal_generate(export_dir: str | Path, prompt_ids: npt.ArrayLike, max_new_tokens: int,
                              *raw: npt.ArrayLike,
                              modality: str = "image", image_size: tuple[int, int] | None = None,
                              rows: list[np.ndarray] | None = None) -> list[int]:
    """The ``max_new_tokens`` token ids tract's greedy choice gives after ``prompt_ids``
    (``[1, S]``, holding one placeholder token per embedding row) with the encoder's rows
    of ``raw`` (none: a text-only prompt; ``image_size``: which encoder, see
    :func:`encoder_entry`), or the encoder outputs ``rows`` already computed (several
    images: :func:`tract_encode_images`). A decoder with tract's stateful cache generates
    in one tract state."""
    from t2n.llm.common.generate import greedy_ids

    decoder = _Decoder(export_dir, modality)
    if rows is None and raw:
        rows = tract_encode_all(export_dir, *raw, modality=modality, image_size=image_size)
    pending = [rows]

    def step(ids: np.ndarray) -> list[np.ndarray]:  # the rows go with the prefill only
        return decoder.step(ids, pending.pop() if pending else None)

    return greedy_ids(step, np.asarray(prompt_ids, dtype=np.int64).reshape(1, -1), max_new_tokens)
