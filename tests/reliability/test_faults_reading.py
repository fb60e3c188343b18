"""Weight files truncated or replaced while an artifact is being saved.

Weights may stay in their file until they are written: memory-mapped (the
``safetensors`` library, ``torch.load(mmap=True)``, ``numpy.memmap``) or read on demand
(``weights_from``). Touching a mapped page past a shrunk file's end kills the process
with SIGBUS, so every scenario runs in a child process; each must end with a typed
:class:`~t2n.errors.CorruptTensorFileError` naming the file and the tensor, leave
nothing at the destination, and the child must exit normally (never by a signal).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(r'''
    import json, os, sys, traceback
    from pathlib import Path
    import numpy as np, torch
    from safetensors.torch import load_file, save_file
    import t2n
    from t2n.serialize.torch_io import export_tensors_from_disk_to_nnef, export_tensors_to_nnef

    tmp = Path(sys.argv[1])
    only = sys.argv[2:]

    class Lin(torch.nn.Module):
        def __init__(self, dtype=torch.float32):
            super().__init__()
            self.proj = torch.nn.Linear(256, 512, dtype=dtype)
        def forward(self, x):
            return self.proj(x)

    def checkpoint(name, dtype=torch.float32):
        path = tmp / name
        save_file(Lin(dtype).state_dict(), path)
        return path

    def shrink(path, keep=4096):
        os.truncate(path, keep)

    def model_mapped(dest, dtype=torch.float32):
        path = checkpoint(f"mapped-{dest}.safetensors", dtype)
        model = Lin(dtype)
        model.load_state_dict(load_file(path), assign=True)  # weights stay mapped from the file
        art = t2n.compile(model, (torch.randn(2, 256, dtype=dtype),))
        shrink(path)
        return path, lambda: art.save(tmp / dest)

    def weights_from(dest, dtype=torch.float32, change=shrink):
        path = checkpoint(f"wf-{dest}.safetensors", dtype)
        model = Lin(dtype)
        art = t2n.compile(model, (torch.randn(2, 256, dtype=dtype),), weights_from=path)
        change(path)
        return path, lambda: art.save(tmp / dest)

    def replace(path):
        other = path.with_name("other.safetensors")
        save_file(Lin().state_dict(), other)
        os.replace(other, path)

    def rewrite_in_place(path):
        data = bytearray(path.read_bytes())
        data[-8:] = bytes(8)
        with open(path, "r+b") as f:
            f.write(data)
        os.utime(path, ns=(0, 0))

    def mapping_weights_from(dest):
        path = checkpoint(f"wfmap-{dest}.safetensors")
        art = t2n.compile(Lin(), (torch.randn(2, 256),), weights_from=load_file(path))
        shrink(path)
        return path, lambda: art.save(tmp / dest)

    def pt_from_disk(dest):
        path = tmp / "m.pt"
        torch.save(Lin().state_dict(), path)
        def run():
            export_tensors_from_disk_to_nnef(path, tmp / dest,
                                             fn_check_found_tensors=lambda found: shrink(path, 1024))
        return path, run

    def pt_mapped_model(dest):
        path = tmp / "mm.pt"
        torch.save(Lin().state_dict(), path)
        model = Lin()
        model.load_state_dict(torch.load(path, mmap=True, weights_only=True), assign=True)
        art = t2n.compile(model, (torch.randn(2, 256),))
        shrink(path, 1024)
        return path, lambda: art.save(tmp / dest)

    def memmap_state_dict(dest):
        path = tmp / "w.npy"
        np.save(path, np.random.rand(512, 256).astype(np.float32))
        arr = np.load(path, mmap_mode="r")
        shrink(path, 1024)
        return path, lambda: export_tensors_to_nnef({"proj.weight": arr}, tmp / dest)

    def memmap_cut_in_last_page(dest):
        path = tmp / "v.npy"
        np.save(path, np.random.rand(1000).astype(np.float32))  # header 128 bytes: ends at 4128
        arr = np.load(path, mmap_mode="r")
        shrink(path, 4100)  # inside the last page: no SIGBUS, but its last bytes would read 0
        return path, lambda: export_tensors_to_nnef({"v": arr}, tmp / dest)

    SCENARIOS = {
        "mapped model f32 -> dir": lambda: model_mapped("a"),
        "mapped model f32 -> tar": lambda: model_mapped("a.tar"),
        "mapped model f32 -> tgz": lambda: model_mapped("a.tgz"),
        "mapped model bf16 (as f16) -> dir": lambda: model_mapped("b", torch.bfloat16),
        "mapped model bf16 (as f16) -> tgz": lambda: model_mapped("b.tgz", torch.bfloat16),
        "weights_from f32 truncated -> dir": lambda: weights_from("c"),
        "weights_from f32 truncated -> tar": lambda: weights_from("c.tar"),
        "weights_from f32 truncated -> tgz": lambda: weights_from("c.tgz"),
        "weights_from bf16 truncated -> dir": lambda: weights_from("d", torch.bfloat16),
        "weights_from replaced (os.replace) -> dir": lambda: weights_from("e", change=replace),
        "weights_from rewritten in place -> tar": lambda: weights_from("f.tar", change=rewrite_in_place),
        "weights_from mapping of mapped tensors -> dir": lambda: mapping_weights_from("g"),
        ".pt from disk truncated after opening": lambda: pt_from_disk("h"),
        ".pt mapped by torch.load(mmap=True) -> tgz": lambda: pt_mapped_model("i.tgz"),
        "numpy memmap state dict": lambda: memmap_state_dict("j"),
        "numpy memmap cut inside its last page": lambda: memmap_cut_in_last_page("j2"),
    }

    for label, make in SCENARIOS.items():
        if only and label not in only:
            continue
        path, run = make()
        try:
            run()
            result = {"error": None}
        except Exception as exc:
            result = {"error": type(exc).__name__, "message": str(exc),
                      "cause": type(exc.__cause__).__name__ if exc.__cause__ else None}
        result["file"] = str(path)
        result["left"] = sorted(p.name for p in tmp.iterdir() if p.name[0] in "abcdefghij" or ".t2n-" in p.name)
        print(json.dumps({label: result}), flush=True)
        if os.environ.get("SHOW"):
            print(label, "->", result["error"], result.get("message"), file=sys.stderr)
''')

LABELS = [
    "mapped model f32 -> dir", "mapped model f32 -> tar", "mapped model f32 -> tgz",
    "mapped model bf16 (as f16) -> dir", "mapped model bf16 (as f16) -> tgz",
    "weights_from f32 truncated -> dir", "weights_from f32 truncated -> tar",
    "weights_from f32 truncated -> tgz", "weights_from bf16 truncated -> dir",
    "weights_from replaced (os.replace) -> dir", "weights_from rewritten in place -> tar",
    "weights_from mapping of mapped tensors -> dir", ".pt from disk truncated after opening",
    ".pt mapped by torch.load(mmap=True) -> tgz", "numpy memmap state dict",
    "numpy memmap cut inside its last page",
]
"""16 faults: each a weight file changed between the moment t2n (or the user) opened it
and the moment the save reads it."""


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    """Runs every scenario in one child process (one torch import); a signal there
    fails every scenario that had not reported yet."""
    tmp = tmp_path_factory.mktemp("faults")
    script = tmp / "scenarios.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, str(script), str(tmp)], capture_output=True, text=True,
                          env=env, timeout=300, check=False)
    found: dict[str, dict] = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            found.update(json.loads(line))
    return proc, found


@pytest.mark.parametrize("label", LABELS)
def test_changed_weight_file_gives_a_typed_error(outcomes, label):
    proc, found = outcomes
    if label not in found:
        how = (f"killed by {signal.Signals(-proc.returncode).name}" if proc.returncode < 0
               else f"exit code {proc.returncode}")
        pytest.fail(f"the child process never reported this scenario ({how}):\n{proc.stderr[-3000:]}")
    result = found[label]
    assert result["error"] == "CorruptTensorFileError", result
    message = result["message"]
    assert os.path.basename(result["file"]) in message
    assert "nothing was written" in message or "truncated" in message
    if "numpy" not in label and "torch.load" not in label:  # no tensor names in those files
        assert "proj.weight" in message or "proj.bias" in message, message
    assert "weights_only" not in message
    assert result["left"] == [], f"left behind: {result['left']}"


def test_child_process_ended_normally(outcomes):
    proc, found = outcomes
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert set(found) == set(LABELS)
