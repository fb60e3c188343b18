"""NeMo's speech classifiers, which a device runs beside a recognizer: what kind a model
is and the facts its export's manifest records.

* ``EncDecClassificationModel`` (MatchboxNet speech commands, MarbleNet VAD on segments):
  one label per utterance, its ``ConvASRDecoderClassification`` pooling the encoder's
  frames (all of them, the frames NeMo pads the features with included);
* ``EncDecFrameClassificationModel`` (frame MarbleNet VAD): one label per encoded frame,
  its decoder (a ``MultiLayerPerceptron``) applied to every frame.

Both have a recognizer's mel preprocessor and convolution encoder (``ConvASREncoder``);
what their artifacts could not compute as NeMo does is refused here, by name, before
anything is compiled.
"""

from __future__ import annotations

from typing import Any

import attrs

from t2n.errors import NemoExportError
from t2n.nemo.lengths import is_conv_encoder
from t2n.nemo.model import RECOGNIZERS

CLASSIFIERS = {"EncDecClassificationModel": "utterance", "EncDecFrameClassificationModel": "frame"}
"""NeMo's classifier classes t2n.nemo exports, and the kind of labels each gives."""

OUTPUTS = ("logits", "probabilities", "log_probabilities")
"""What a classifier's decoder gives: its probabilities are their softmax (or themselves)."""

TO_ASR = ("export it with t2n.nemo.export_asr (t2n nemo-asr MODEL -o OUT) and transcribe with "
          "t2n.nemo.load (t2n nemo-transcribe)")
TO_CLASSIFIER = ("export it with t2n.nemo.export_classifier (t2n nemo-classifier MODEL -o OUT) and classify with "
                 "t2n.nemo.load_classifier (t2n nemo-classify)")


@attrs.frozen
class ClassifierFacts:
    """What the artifacts' user needs to know about the classifier."""

    kind: str
    """``utterance`` (one label per utterance) or ``frame`` (one per encoded frame)."""
    class_name: str
    labels: tuple[str, ...]
    outputs: str
    """What the decoder gives (one of :data:`OUTPUTS`)."""
    sample_rate: int
    features: int
    hop_length: int
    subsampling_factor: int
    d_model: int
    pad_to: int
    """NeMo's featurizer pads the frames to a multiple of this (0: not at all)."""
    pad_value: float

    @property
    def frame_seconds(self) -> float | None:
        """The audio one label covers, for a frame classifier."""
        if self.kind != "frame":
            return None
        return self.hop_length * self.subsampling_factor / self.sample_rate


def classifier_kind(model: Any) -> str | None:
    """``utterance`` or ``frame`` for a NeMo classifier t2n.nemo exports, else ``None``."""
    for cls in type(model).__mro__:
        if cls.__name__ in CLASSIFIERS:
            return CLASSIFIERS[cls.__name__]
    return None


def is_recognizer(model: Any) -> bool:
    return bool({c.__name__ for c in type(model).__mro__} & set(RECOGNIZERS))


def classifier_facts(model: Any) -> ClassifierFacts:
    """The facts of the NeMo classifier ``model``; anything else, or a part its artifacts
    would not compute as NeMo does, gives :class:`NemoExportError` saying what to do."""
    kind = _kind_or_refuse(model)
    for part in ("preprocessor", "encoder", "decoder"):
        if getattr(model, part, None) is None:
            raise NemoExportError(part, f"{type(model).__name__} has no {part}")
    _refuse_parts(model, kind)
    labels = tuple(str(v) for v in (_get(getattr(model, "cfg", None), "labels") or ()))
    classes = _classes_of(model.decoder)
    if not labels or (classes is not None and classes != len(labels)):
        raise NemoExportError("decoder", f"the model's config has {len(labels)} labels but its decoder gives "
                                         f"{classes} classes: set the config's labels to the decoder's classes, "
                                         "in order")
    featurizer = model.preprocessor.featurizer
    encoder = model.encoder
    return ClassifierFacts(
        kind=kind, class_name=type(model).__name__, labels=labels, outputs=_outputs(model.decoder),
        sample_rate=int(getattr(model.preprocessor, "_sample_rate", 16000)), features=int(encoder._feat_in),
        hop_length=int(featurizer.hop_length), subsampling_factor=int(encoder.subsampling_factor),
        d_model=int(encoder._feat_out), pad_to=int(featurizer.pad_to), pad_value=float(featurizer.pad_value))


def _kind_or_refuse(model: Any) -> str:
    kind = classifier_kind(model)
    if kind is not None:
        if getattr(model, "is_regression_task", False):
            raise NemoExportError("model", f"{type(model).__name__} is set up for regression (is_regression_task): "
                                           "t2n.nemo exports classifiers, whose outputs are labels")
        return kind
    name = type(model).__name__
    if is_recognizer(model):
        raise NemoExportError("model", f"{name} is a speech recognizer, not a classifier: {TO_ASR}")
    raise NemoExportError("model", f"{name} is not a NeMo classifier t2n.nemo exports (EncDecClassificationModel: "
                                   "one label per utterance; EncDecFrameClassificationModel: one per frame)")


def _refuse_parts(model: Any, kind: str) -> None:
    """What the classifier's artifacts would not compute as NeMo's forward does."""
    featurizer = getattr(model.preprocessor, "featurizer", None)
    if featurizer is None or not hasattr(featurizer, "pad_to") or type(model.preprocessor).__name__ != \
            "AudioToMelSpectrogramPreprocessor":
        raise NemoExportError("preprocessor", f"{type(model.preprocessor).__name__} is not NeMo's mel-spectrogram "
                                              "preprocessor (AudioToMelSpectrogramPreprocessor), the one t2n.nemo "
                                              "exports for classifiers, which pool over its padded frames")
    if not isinstance(featurizer.pad_to, int):
        raise NemoExportError("preprocessor", f"pad_to={featurizer.pad_to!r} pads every utterance to the longest "
                                              "duration NeMo was set up for; give the preprocessor an integer pad_to")
    if not is_conv_encoder(model.encoder):
        raise NemoExportError("encoder", f"{type(model.encoder).__name__}: t2n.nemo exports classifiers with NeMo's "
                                         "convolution encoder (ConvASREncoder: MatchboxNet, MarbleNet)")
    if kind == "utterance" and type(model.decoder).__name__ != "ConvASRDecoderClassification":
        raise NemoExportError("decoder", f"{type(model.decoder).__name__}: t2n.nemo exports utterance classifiers "
                                         "with NeMo's ConvASRDecoderClassification (pooling and a linear layer)")
    if kind == "frame" and getattr(model, "crop_or_pad", None) is not None:
        raise NemoExportError("model", "crop_or_pad_augment crops audio longer than its length at a random offset, "
                                       "in inference too, so NeMo's own frames change from run to run: remove it "
                                       "(model.crop_or_pad = None) and export again")


def _classes_of(decoder: Any) -> int | None:
    """How many classes the decoder gives: ConvASRDecoderClassification's ``num_classes``,
    a MultiLayerPerceptron's last layer's outputs (``None`` when neither)."""
    if isinstance(getattr(decoder, "num_classes", None), int):
        return int(decoder.num_classes)
    last = getattr(decoder, "last_linear_layer", None)
    return int(last.out_features) if last is not None else None


def _outputs(decoder: Any) -> str:
    """What the decoder gives: ConvASRDecoderClassification logits unless ``return_logits``
    is off; MultiLayerPerceptron logits, or log-probabilities with ``log_softmax``."""
    if getattr(decoder, "_return_logits", True) is False:
        return "probabilities"
    if getattr(decoder, "log_softmax", False) is True:
        return "log_probabilities"
    return "logits"


def _get(cfg: Any, key: str) -> Any:
    try:
        return cfg.get(key)
    except AttributeError:
        return None
