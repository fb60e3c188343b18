"""Helpers of the command-line tests: how ``t2n`` is run, and files they run it on."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import subprocess
import sys
import textwrap
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TextIO

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


def make_runner(*, real_process: bool = False) -> Run:
    """``t2n_cli(*args, cwd=...)``: run ``t2n ARGS`` and return the finished process
    (text stdout/stderr, exit status).

    By default the command runs in this process (``t2n.cli.main.main``, what the console
    script calls), as a fresh process would see it: its own stdout/stderr, working
    folder, Python's default warning filters, and afterwards no trace of what it
    imported from the user's folders or added to ``sys.path`` and t2n's loggers. A child
    process costs 10-30 s of imports per call. ``real_process=True`` runs the installed
    console script instead (the tests of the script itself)."""
    if real_process:
        return _process_runner()

    def run(*args: str | os.PathLike[str], cwd: str | os.PathLike[str] | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess[str]:
        del timeout  # a child's limit; a test here has pytest's own
        argv = [*map(str, args)]
        out, err = io.StringIO(), io.StringIO()
        with _as_in_a_fresh_process(cwd, err), contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err):
            status = _exit_status(argv)
        return subprocess.CompletedProcess(["t2n", *argv], status, out.getvalue(), err.getvalue())

    return run


def _exit_status(argv: list[str]) -> int:
    """What ``t2n ARGV`` exits with; an exception that escapes is printed as Python
    prints it before exiting with 1."""
    from t2n.cli.main import main

    try:
        return main(argv)
    except SystemExit as exc:
        code = exc.code
        if code is None or isinstance(code, int):
            return code or 0
        print(code, file=sys.stderr)
        return 1
    except Exception:  # a process would print it and exit 1
        traceback.print_exc()
        return 1


# Python's own warning filters (``python -W`` unset, release build): a child process
# starts with these, not with pytest's.
_PROCESS_WARNING_FILTERS = (
    ("default", DeprecationWarning, "__main__"),
    ("ignore", DeprecationWarning, None),
    ("ignore", PendingDeprecationWarning, None),
    ("ignore", ImportWarning, None),
    ("ignore", ResourceWarning, None),
)


@contextlib.contextmanager
def _as_in_a_fresh_process(cwd: str | os.PathLike[str] | None, stderr: io.StringIO) -> Iterator[None]:
    """Run the body as a new ``t2n`` process would see it, and undo what it left."""
    saved_path, saved_modules, saved_cwd = list(sys.path), set(sys.modules), os.getcwd()
    loggers = [logging.getLogger(name) for name in ("t2n", "t2n.llm")]
    saved_logging = [(lg, list(lg.handlers), lg.level) for lg in loggers]
    kept_roots = [Path(p).resolve() for p in (sys.prefix, sys.base_prefix, _REPO_ROOT)]
    try:
        with warnings.catch_warnings():
            warnings.resetwarnings()
            for action, category, module in reversed(_PROCESS_WARNING_FILTERS):
                warnings.filterwarnings(action, category=category, module=module or "")

            def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                     file: TextIO | None = None, line: str | None = None) -> None:
                stderr.write(warnings.formatwarning(message, category, filename, lineno, line))

            warnings.showwarning = show
            if cwd is not None:
                os.chdir(cwd)
            yield
    finally:
        os.chdir(saved_cwd)
        sys.path[:] = saved_path
        for lg, handlers, level in saved_logging:
            lg.handlers[:] = handlers
            lg.setLevel(level)
        for name in set(sys.modules) - saved_modules:
            source = getattr(sys.modules[name], "__file__", None)
            if source and not any(Path(source).resolve().is_relative_to(root) for root in kept_roots):
                del sys.modules[name]  # the user's factories: the next test may name others alike


_REPO_ROOT = Path(t2n.__file__).resolve().parent.parent


def _process_runner() -> Run:
    """The installed console script in a child process that imports the t2n under test."""
    command = t2n_command()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(_REPO_ROOT), *filter(None, [env.get("PYTHONPATH")])])
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
