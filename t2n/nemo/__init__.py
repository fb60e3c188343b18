"""NeMo speech recognizers as the artifacts an application streams audio through.

    export = t2n.nemo.export_asr("model.nemo", "out/")      # or a config, or a model
    asr = t2n.nemo.load("out/")
    ids = asr.transcribe(samples)                            # greedy, in tract
    print(asr.text(ids))                                     # NeMo's text of the ids
    ids = asr.transcribe_file("hello.wav")                   # mono PCM at the model's rate

``t2n nemo-asr MODEL -o OUT`` does the export from the command line. NeMo is needed only
to export (``pip install 't2n[nemo]'``); transcribing needs tract. See ``docs/speech.md``.
"""

from t2n.nemo.audio import AudioLimits, read_audio
from t2n.nemo.export import AsrExport, export_asr
from t2n.nemo.manifest import Manifest
from t2n.nemo.model import ModelFacts, load_model, model_facts
from t2n.nemo.plans import default_plans
from t2n.nemo.text import Detokenizer
from t2n.nemo.transcribe import AsrArtifacts, load

__all__ = ["AsrArtifacts", "AsrExport", "AudioLimits", "Detokenizer", "Manifest", "ModelFacts", "default_plans",
           "export_asr", "load", "load_model", "model_facts", "read_audio"]
