"""Helpers of the command-line tests: how ``t2n`` is run, and files they run it on."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest

import t2n
from t2n.serialize.dat import dat_bytes

Run = Callable[..., subprocess.CompletedProcess[str]]


def t2n_command() -> list[str]:
    """The installed ``t2n`` script beside this Python; outside CI, when it is not
    installed (an uninstalled checkout), ``python -m t2n.cli``. Under CI a missing
    script fails: the console script is what users run."""
    script = Path(sys.executable).with_name("t2n")
    if script.is_file():
        return [str(script)]
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"the t2n console script is not installed beside {sys.executable} "
                    "(pip install -e . should create it from [project.scripts])")
    return [sys.executable, "-m", "t2n.cli"]


def make_runner() -> Run:
    """``t2n_cli(*args, cwd=...)``: run ``t2n ARGS`` and return the finished process
    (text stdout/stderr). The child imports the t2n under test."""
    command = t2n_command()
    env = dict(os.environ)
    root = str(Path(t2n.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
    env.setdefault("OMP_NUM_THREADS", "1")

    def run(*args: str | os.PathLike[str], cwd: str | os.PathLike[str] | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*command, *map(str, args)], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=timeout)

    return run


MODELS_PY = '''
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv1d(3, 4, 3, padding=1)
        self.lin = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.lin(torch.relu(self.conv(x)).transpose(1, 2))


def build(length="10"):
    torch.manual_seed(0)
    return Net().eval(), (torch.rand(1, 3, int(length)),)
'''

FAST_PY = '''
NOT_CALLABLE = 3


def returns_int():
    return 42


def returns_strings():
    return "model", ()


def returns_four():
    return 1, 2, 3, 4


def raises():
    raise RuntimeError("factory broke: cannot find weights.bin")
'''

BROKEN_PY = '''
import a_package_that_is_not_installed_xyz  # noqa: F401


def build():
    return None
'''


def write_factories(folder: Path) -> Path:
    """A folder with ``models.py`` (a torch model factory), ``fast.py`` (factories that
    return wrong things, without importing torch) and ``broken.py`` (fails to import)."""
    for name, text in (("models.py", MODELS_PY), ("fast.py", FAST_PY), ("broken.py", BROKEN_PY)):
        (folder / name).write_text(textwrap.dedent(text))
    return folder


GRAPH_NNEF = """version 1.0;

extension tract_registry tract_core;
extension tract_symbol N;
extension tract_assert N >= 1;

fragment tract_core_properties(
) -> (properties: (string, tensor<scalar>)[])
{
    properties = [
        ("made_by", "hand; for tests"),
        ("answer", 42)
    ];
}

graph main(inp) -> (out, total)
{
    # out = inp + w, along a symbolic batch
    inp = external<scalar>(shape = [N, 3]);
    w = variable<scalar>(shape = [1, 3], label = "layer.w");
    out = add(inp, w);
    total = sum_reduce(out, axes = [0, 1]);
}
"""

WEIGHT = np.array([[1.0, -2.0, 0.5]], dtype=np.float32)


def write_artifact(folder: Path, graph: str = GRAPH_NNEF, tensors: Sequence[tuple[str, bytes]] | None = None) -> Path:
    """A small artifact written by hand (no torch): ``out = inp + w``, ``total = sum(out)``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "graph.nnef").write_text(graph)
    for name, data in tensors if tensors is not None else [("layer.w.dat", dat_bytes(WEIGHT))]:
        (folder / name).write_bytes(data)
    return folder
