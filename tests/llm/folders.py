"""Checkpoint folders as ``save_pretrained`` writes them, with a small tokenizer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import torch


def save_checkpoint(model: torch.nn.Module, folder: Path, *, tokenizer: bool = True) -> Path:
    """``folder`` with ``config.json``, ``model.safetensors`` and (optionally) a word-level
    ``tokenizer.json`` of the model's vocabulary."""
    model.save_pretrained(str(folder))
    if tokenizer:
        from tokenizers import Tokenizer, models, pre_tokenizers

        vocab = {f"w{i}": i for i in range(int(model.get_input_embeddings().weight.shape[0]))}
        tok = Tokenizer(models.WordLevel(vocab, unk_token="w0"))
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
        tok.save(str(folder / "tokenizer.json"))
    return folder


_PEAK_CHILD = r"""
import json, sys
import t2n.llm.common.streaming as streaming
from t2n.llm import export_llm
streaming.REFERENCE_MEMORY_FRACTION = 0.0
folder, out, warm, warm_out = sys.argv[1:5]
export_llm(warm, warm_out, verify=False)  # every module imported, every code path run once
def status(key):
    return next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith(key))
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # the peak restarts from the current resident size
before = status("VmRSS:")
export_llm(folder, out, verify=False)
print(json.dumps({"before": before, "peak": status("VmHWM:")}))
"""


def export_memory_growth(folder: Path, out: Path, warm: Path) -> int:
    """Bytes the resident memory grows by while ``export_llm`` exports ``folder`` (without
    the check, which would load it) in a fresh process, after a first export of the small
    ``warm`` folder has imported every module and run every code path once."""
    result = subprocess.run([sys.executable, "-c", _PEAK_CHILD, str(folder), str(out), str(warm),
                             str(out.with_name(out.name + "_warm"))], capture_output=True, text=True, check=True)
    measured = json.loads(result.stdout.strip().splitlines()[-1])
    return int(measured["peak"] - measured["before"])
