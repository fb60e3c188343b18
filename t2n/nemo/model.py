"""NeMo speech recognizers: loaded from a ``.nemo`` file, built from a config (a YAML
file or a mapping, with random weights), or given; and what kind they are.

NeMo is imported only here and only when a model must be loaded (importing
``nemo.collections.asr`` takes tens of seconds): a model object given is read by its
attributes.
"""

from __future__ import annotations

import importlib
import os
import tarfile
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import torch

from t2n.errors import NemoArchiveError, NemoExportError, NemoUnavailableError
from t2n.nemo.text import text_facts

KINDS = ("ctc", "rnnt", "tdt", "hybrid_rnnt_ctc", "hybrid_tdt_ctc")
"""What a recognizer decodes with: a CTC head, a transducer (RNN-T or token-and-duration
TDT), or both (hybrid models decode with the transducer by default)."""

MODEL_PACKAGE = "nemo.collections.asr.models."


def import_nemo_asr() -> Any:
    """``nemo.collections.asr``, or :class:`NemoUnavailableError` saying how to install it."""
    try:
        asr = importlib.import_module("nemo.collections.asr")
    except ImportError as exc:
        raise NemoUnavailableError(
            f"NeMo is not installed here ({exc}): pip install 't2n[nemo]' (nemo-toolkit[asr])") from exc
    from t2n.reference.releases import check_release

    check_release("nemo_toolkit", str(getattr(importlib.import_module("nemo"), "__version__", "")))
    return asr


@attrs.frozen
class ModelFacts:
    """What the artifacts' user needs to know about the recognizer."""

    kind: str
    class_name: str
    vocabulary: tuple[str, ...]
    blank_id: int
    durations: tuple[int, ...]
    max_symbols: int | None
    sample_rate: int
    features: int
    hop_length: int
    subsampling_factor: int
    d_model: int
    pred_hidden: int
    pred_layers: int
    text: Mapping[str, Any] = attrs.field(factory=dict, eq=False, hash=False)
    """How NeMo's decoding writes the labels as text (:func:`t2n.nemo.text.text_facts`)."""

    @property
    def transducer(self) -> bool:
        return self.kind != "ctc"

    @property
    def has_ctc(self) -> bool:
        return self.kind == "ctc" or self.kind.startswith("hybrid")


def load_model(source: Any, *, seed: int = 0) -> Any:
    """A NeMo ASR model in eval mode on the CPU, from a model object, a ``.nemo`` file, a
    YAML config file or a config mapping (built with random weights, seeded by ``seed``).

    A config is the ``model:`` section NeMo's training configs hold (or the whole file
    with that section); its class is its ``target`` (a class of
    ``nemo.collections.asr.models``), else guessed from its sections: a
    ``ConvASRDecoderClassification`` decoder an utterance classifier, a
    ``MultiLayerPerceptron`` one a frame classifier, ``joint`` and ``aux_ctc`` a hybrid
    model, ``joint`` a transducer, otherwise CTC (``*BPE`` classes when it has a
    ``tokenizer`` section)."""
    if isinstance(source, torch.nn.Module):
        return source.eval()
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.exists():
            raise NemoExportError("model", f"{path} does not exist (give a .nemo file, a YAML config or a model)")
        if path.suffix == ".nemo":
            return _restore(path)
        if path.suffix.lower() not in (".yaml", ".yml"):
            raise NemoExportError("model", f"{path}: give a .nemo file or a .yaml/.yml config")
        import_nemo_asr()
        from omegaconf import OmegaConf

        source = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    if isinstance(source, Mapping) or type(source).__name__ == "DictConfig":
        return _from_config(source, seed)
    raise NemoExportError("model", f"expected a NeMo model, a .nemo file, a YAML config or a mapping, got "
                                   f"{type(source).__name__}")


def _restore(path: Path) -> Any:
    """The model of a ``.nemo`` file; one NeMo cannot restore gives
    :class:`NemoArchiveError` saying what is wrong with the file and what to do."""
    asr = import_nemo_asr()
    try:
        model = asr.models.ASRModel.restore_from(str(path), map_location="cpu")
    except Exception as exc:  # NeMo's own errors (tarfile, yaml, a missing member...) say little
        why = " ".join(str(exc).split())
        raise NemoArchiveError(str(path), archive_problem(path) or
                               f"NeMo could not restore {path} ({type(exc).__name__}: {why}); check that it is "
                               "a .nemo file saved by this NeMo release (model.save_to)") from exc
    return model.eval()


ARCHIVE_CONFIG = "model_config.yaml"
"""The member every ``.nemo`` archive holds (NeMo's ``SaveRestoreConnector``)."""


def archive_problem(path: Path) -> str:
    """What makes ``path`` no ``.nemo`` archive NeMo can restore, or ``""`` when it looks
    like one: not a tar file, truncated (every member is read to its end), or without
    ``model_config.yaml``."""
    advice = "give a .nemo file saved by NeMo (model.save_to), or a YAML config"
    try:
        size = path.stat().st_size
        with tarfile.open(path, "r:*") as archive:
            members = archive.getmembers()
            for member in members:
                if member.isfile():
                    stream = archive.extractfile(member)
                    if stream is not None:
                        while stream.read(1 << 20):
                            pass
    except (tarfile.ReadError, tarfile.CompressionError) as exc:
        why = " ".join(str(exc).split())
        if "unexpected end of data" in why or isinstance(exc, tarfile.CompressionError):
            return f"{path} is truncated or corrupt ({why}, {size} bytes): copy or download it again"
        what = "an empty file" if size == 0 else "neither a tar file nor a compressed one"
        return f"{path} is not a .nemo archive (a tar file): it is {what}; {advice}"
    except (EOFError, OSError, tarfile.TarError, zlib.error) as exc:
        why = " ".join(str(exc).split())
        return f"{path} is truncated or corrupt ({type(exc).__name__}: {why}): copy or download it again"
    names = [m.name for m in members]
    if not any(Path(n).name == ARCHIVE_CONFIG and len(Path(n).parts) <= 2 for n in names):
        held = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "") if names else "nothing"
        return f"{path} is a tar archive but not a NeMo model: it has no {ARCHIVE_CONFIG} (it holds {held}); {advice}"
    return ""


def _from_config(config: Any, seed: int) -> Any:
    import_nemo_asr()
    from omegaconf import OmegaConf

    cfg: Any = OmegaConf.create(OmegaConf.to_container(config, resolve=True) if not isinstance(config, Mapping)
                                else dict(config))
    if "model" in cfg and "encoder" not in cfg:
        cfg = cfg.model
    target = cfg.get("target") or _guess_class(cfg)
    if not str(target).startswith(MODEL_PACKAGE):
        raise NemoExportError("model", f"target {target!r} is not a class of {MODEL_PACKAGE.rstrip('.')}")
    module, _, name = str(target).rpartition(".")
    cls = getattr(importlib.import_module(module), name, None)
    if cls is None:
        raise NemoExportError("model", f"NeMo has no class {target}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = cls(cfg=cfg)
    return model.eval()


def _guess_class(cfg: Any) -> str:
    decoder = str((cfg.get("decoder") or {}).get("_target_", ""))
    if decoder.endswith("ConvASRDecoderClassification"):
        return MODEL_PACKAGE + "EncDecClassificationModel"
    if decoder.endswith("MultiLayerPerceptron"):
        return MODEL_PACKAGE + "EncDecFrameClassificationModel"
    bpe = "BPE" if "tokenizer" in cfg else ""
    if "joint" in cfg:
        return MODEL_PACKAGE + (f"EncDecHybridRNNTCTC{bpe}Model" if "aux_ctc" in cfg else f"EncDecRNNT{bpe}Model")
    return MODEL_PACKAGE + f"EncDecCTCModel{bpe}"


def model_facts(model: Any) -> ModelFacts:
    """The kind of ``model`` and the facts its artifacts' manifest records; a model
    t2n.nemo cannot export as a whole gives :class:`NemoExportError` naming the part."""
    for part in ("preprocessor", "encoder", "decoder"):
        if getattr(model, part, None) is None:
            raise NemoExportError(part, f"{type(model).__name__} has no {part}: t2n.nemo exports NeMo's "
                                        "CTC, transducer (RNN-T, TDT) and hybrid speech recognizers")
    _refuse_other_models(model)
    cfg = getattr(model, "cfg", None) or {}
    encoder, decoder = model.encoder, model.decoder
    joint = getattr(model, "joint", None)
    featurizer = getattr(model.preprocessor, "featurizer", None)
    durations: tuple[int, ...] = ()
    if joint is not None:
        decoding = _get(cfg, "decoding") or {}
        durations = tuple(int(d) for d in (_get(decoding, "durations") or ()))
        multi_blank = _get(decoding, "big_blank_durations") or ()
        if multi_blank:
            raise NemoExportError("joint", "multi-blank transducers (big_blank_durations) are not exported: "
                                           "their greedy loop is not the RNN-T or TDT one")
        if durations and int(getattr(joint, "num_extra_outputs", 0)) != len(durations):
            raise NemoExportError("joint", f"the decoding config has {len(durations)} durations but the joint "
                                           f"network {getattr(joint, 'num_extra_outputs', 0)} extra outputs")
        kind = "tdt" if durations else "rnnt"
        if getattr(model, "ctc_decoder", None) is not None:
            kind = f"hybrid_{kind}_ctc"
        vocabulary = tuple(str(v) for v in (getattr(joint, "vocabulary", None) or ()))
        blank = int(decoder.blank_idx)
        max_symbols = _get(_get(decoding, "greedy") or {}, "max_symbols")
        max_symbols = int(max_symbols) if max_symbols is not None else 10
        pred_hidden, pred_layers = int(decoder.pred_hidden), int(decoder.pred_rnn_layers)
    else:
        kind, max_symbols, pred_hidden, pred_layers = "ctc", None, 0, 0
        vocabulary = tuple(str(v) for v in (getattr(decoder, "vocabulary", None) or ()))
        blank = int(decoder.num_classes_with_blank) - 1
    return ModelFacts(
        kind=kind, class_name=type(model).__name__, vocabulary=vocabulary, blank_id=blank, durations=durations,
        max_symbols=max_symbols, sample_rate=int(getattr(model.preprocessor, "_sample_rate", 16000)),
        features=int(getattr(encoder, "_feat_in", 0)),
        hop_length=int(getattr(featurizer, "hop_length", 0)) if featurizer is not None else 0,
        subsampling_factor=int(getattr(encoder, "subsampling_factor", 1)),
        d_model=int(getattr(encoder, "_feat_out", 0) or getattr(encoder, "d_model", 0)),
        pred_hidden=pred_hidden, pred_layers=pred_layers, text=text_facts(model, vocabulary))


RECOGNIZERS = ("EncDecCTCModel", "EncDecRNNTModel")
"""NeMo's speech recognizer classes (the BPE, TDT and hybrid ones derive from them)."""


def _refuse_other_models(model: Any) -> None:
    """A NeMo model with a preprocessor, an encoder and a decoder that is no recognizer
    (a classifier, a speaker model): :class:`NemoExportError` naming it."""
    if {c.__name__ for c in type(model).__mro__} & set(RECOGNIZERS):
        return
    decoder = model.decoder
    if getattr(model, "joint", None) is not None or (hasattr(decoder, "num_classes_with_blank")
                                                     and getattr(decoder, "vocabulary", None) is not None):
        return
    names = {c.__name__ for c in type(model).__mro__}
    classifier = ("; it is a NeMo classifier: export it with t2n.nemo.export_classifier (t2n nemo-classifier "
                  "MODEL -o OUT) and classify with t2n.nemo.load_classifier (t2n nemo-classify)"
                  if names & {"EncDecClassificationModel", "EncDecFrameClassificationModel"} else "")
    raise NemoExportError("model", f"{type(model).__name__} is not a speech recognizer (its decoder "
                                   f"{type(decoder).__name__} gives no labels per frame): t2n.nemo exports NeMo's "
                                   "CTC, transducer (RNN-T, TDT) and hybrid ASR models (EncDecCTCModel, "
                                   f"EncDecRNNTModel and their BPE and hybrid variants){classifier}")


def _get(cfg: Any, key: str) -> Any:
    try:
        return cfg.get(key)
    except AttributeError:
        return None
