"""NeMo speech recognizers and classifiers as the artifacts an application streams audio
through.

    export = t2n.nemo.export_asr("model.nemo", "out/")      # or a config, or a model
    asr = t2n.nemo.load("out/")
    ids = asr.transcribe(samples)                            # greedy, in tract
    print(asr.text(ids))                                     # NeMo's text of the ids
    ids = asr.transcribe_file("hello.wav")                   # mono PCM at the model's rate

    t2n.nemo.export_classifier("commands.nemo", "cls/")      # MatchboxNet, frame MarbleNet
    result = t2n.nemo.load_classifier("cls/").classify_file("yes.wav")
    print(result.label, result.probabilities)                # NeMo's label, its softmax

``t2n nemo-asr MODEL -o OUT`` and ``t2n nemo-classifier MODEL -o OUT`` export from the
command line, ``t2n nemo-transcribe`` and ``t2n nemo-classify`` run the exports. NeMo is
needed only to export (``pip install 't2n[nemo]'``); running needs tract. See
``docs/speech.md``.
"""

from t2n.nemo.audio import AudioLimits, read_audio
from t2n.nemo.classifier import ClassifierFacts, classifier_facts
from t2n.nemo.classifier_export import ClassifierExport, export_classifier
from t2n.nemo.classify import (
           Classification,
           ClassifierArtifacts,
           FrameClassification,
           load_classifier,
)
from t2n.nemo.export import AsrExport, export_asr
from t2n.nemo.manifest import Manifest
from t2n.nemo.model import ModelFacts, load_model, model_facts
from t2n.nemo.plans import default_plans
from t2n.nemo.streaming_export import export_streaming_asr as export_streaming_asr
from t2n.nemo.text import Detokenizer
from t2n.nemo.transcribe import AsrArtifacts, load

__all__ = ["AsrArtifacts", "AsrExport", "AudioLimits", "Classification", "ClassifierArtifacts", "ClassifierExport",
           "ClassifierFacts", "Detokenizer", "FrameClassification", "Manifest", "ModelFacts", "classifier_facts",
           "default_plans", "export_asr", "export_classifier", "load", "load_classifier", "load_model",
           "model_facts", "read_audio"]
