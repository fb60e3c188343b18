"""Running an artifact in a given tract release, whichever one is installed here.

Each tract version gets its own virtual environment, made on first use under a cache
folder (``$T2N_TRACT_CACHE``, else ``~/.cache/t2n``) as ``tract-<version>`` with
``python -m venv`` and ``pip install tract==<version>`` plus a numpy that wheel works
with. The version installed in this process's environment runs here, with no venv.
Artifacts are run by :mod:`t2n.backends.tract.child` in a child process that reads its
inputs from ``.npz`` files and writes its outputs to ``.npz`` files, several artifacts
per child; a tract that aborts takes down only the child.

``TractNNEF(version).run`` (and so ``artifact.check()``) goes through here for a version
other than the installed one when ``T2N_TRACT_ENVIRONMENTS=1`` is set.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.metadata
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from t2n.backends.target import parse_version
from t2n.check.engines import describe_phase
from t2n.errors import EngineCrashedError, EngineError, InvalidArgumentError, TractEnvironmentError

CACHE_VARIABLE = "T2N_TRACT_CACHE"
SWITCH_VARIABLE = "T2N_TRACT_ENVIRONMENTS"
READY_MARK = ".t2n-ready"
CHILD = Path(__file__).with_name("child.py")
INSTALL_TIMEOUT = 900.0


def cache_root() -> Path:
    """Where the per-version environments live."""
    given = os.environ.get(CACHE_VARIABLE)
    return Path(given) if given else Path.home() / ".cache" / "t2n"


def installed_tract_version() -> str | None:
    """The tract wheel installed beside t2n, if any."""
    try:
        return importlib.metadata.version("tract")
    except importlib.metadata.PackageNotFoundError:
        return None


def numpy_requirement(version: str) -> str:
    """tract wheels before 0.23 are built against numpy 1 (their binding reads arrays
    through the numpy 1 C API)."""
    return "numpy<2" if parse_version(version, "tract version") < (0, 23, 0) else "numpy"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One process at a time creates a given environment (test workers share the cache)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def tract_python(version: str, *, cache: Path | None = None, create: bool = True) -> Path:
    """The Python interpreter that has tract ``version``: this one when it is the
    installed version, else the cached environment's (made now unless ``create`` is
    False). Raises :class:`TractEnvironmentError` naming the version, the folder and
    pip's last words when it cannot be made."""
    wanted = ".".join(str(p) for p in parse_version(version, "tract version"))
    if installed_tract_version() == wanted:
        return Path(sys.executable)
    env = (cache or cache_root()) / f"tract-{wanted}"
    python = env / "bin" / "python"
    if (env / READY_MARK).exists():
        return python
    if not create:
        raise TractEnvironmentError(
            f"no environment with tract {wanted} in {env}; create it with "
            f"t2n.backends.tract.environments.tract_python({wanted!r}) (needs the package registry)")
    try:
        with _locked(env.with_name(env.name + ".lock")):
            if not (env / READY_MARK).exists():
                _create(env, wanted)
    except OSError as exc:
        raise TractEnvironmentError(
            f"cannot make the environment for tract {wanted} in {env}: {exc}. What to do: "
            f"point {CACHE_VARIABLE} to a writable folder") from exc
    return python


def _create(env: Path, version: str) -> None:
    wanted = [f"tract=={version}", numpy_requirement(version)]
    # No pip inside the environment: this Python's pip installs into it (--python), which
    # saves bootstrapping a pip per version.
    steps = [
        [sys.executable, "-m", "venv", "--clear", "--without-pip", str(env)],
        [sys.executable, "-m", "pip", "--python", str(env / "bin" / "python"), "install", "--quiet",
         "--disable-pip-version-check", *wanted],
    ]
    for step in steps:
        what = "python -m venv" if step is steps[0] else "pip install " + " ".join(wanted)
        try:
            done = subprocess.run(step, capture_output=True, text=True, timeout=INSTALL_TIMEOUT)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise TractEnvironmentError(
                f"cannot make the environment for tract {version} in {env}: {exc}. What to do: "
                f"check that {env.parent} is writable and the package registry is reachable, "
                f"or point {CACHE_VARIABLE} to another folder") from exc
        if done.returncode != 0:
            tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
            raise TractEnvironmentError(
                f"cannot make the environment for tract {version} in {env} "
                f"({what} failed):\n{tail}\nWhat to do: check that tract=={version} "
                "exists on the package registry for this Python and that the registry is "
                f"reachable, or point {CACHE_VARIABLE} to a folder holding a ready environment")
    (env / READY_MARK).write_text(version + "\n")


def _path_text(path: object) -> str:
    if isinstance(path, (str, os.PathLike)):
        return os.fspath(path)  # type: ignore[return-value]
    hint = " (pass artifact.saved_path, or save it first)" if hasattr(path, "saved_path") else ""
    raise InvalidArgumentError(
        f"the artifact to run must be the path of a saved artifact (folder, .tar or .tgz), "
        f"got {type(path).__name__}{hint}")


@attrs.frozen
class TractJob:
    """One artifact to run: its path (folder or archive), inputs, registries and symbols."""

    path: str = attrs.field(converter=_path_text)
    inputs: Sequence[np.ndarray]
    registries: Sequence[str] = ()
    symbols: Mapping[str, int] | None = None


def run_jobs(version: str, jobs: Sequence[TractJob], *, cache: Path | None = None,
             timeout: float = 600.0) -> list[list[np.ndarray] | EngineError]:
    """Run every job in tract ``version`` (one child process, restarted after a crash);
    per job, its outputs or the :class:`EngineError` (:class:`EngineCrashedError`) it met."""
    python = tract_python(version, cache=cache)
    results: dict[int, list[np.ndarray] | EngineError] = {}
    with tempfile.TemporaryDirectory(prefix="t2n-tract-") as tmp:
        spec: list[dict[str, object]] = []
        for i, job in enumerate(jobs):
            arrays: dict[str, Any] = {f"input_{k}": np.asarray(x) for k, x in enumerate(job.inputs)}
            np.savez(Path(tmp) / f"in{i}.npz", **arrays)
            spec.append({"path": str(job.path), "inputs": str(Path(tmp) / f"in{i}.npz"),
                         "outputs": str(Path(tmp) / f"out{i}.npz"), "registries": list(job.registries),
                         "symbols": dict(job.symbols) if job.symbols else None})
        (Path(tmp) / "jobs.json").write_text(json.dumps(spec))
        start = 0
        while start < len(jobs):
            start = _serve(python, version, Path(tmp), spec, start, results, timeout)
    return [results[i] for i in range(len(jobs))]


def _serve(python: Path, version: str, tmp: Path, spec: list[dict[str, object]], start: int,
           results: dict[int, list[np.ndarray] | EngineError], timeout: float) -> int:
    """One child from job ``start`` on; the index of the first job it did not answer."""
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    env.pop("PYTHONPATH", None)  # the child imports tract and numpy of its own environment only
    try:
        done = subprocess.run([str(python), str(CHILD), str(tmp / "jobs.json"), str(start)],
                              capture_output=True, text=True, timeout=timeout * (len(spec) - start), env=env)
        stdout, code, stderr = done.stdout, done.returncode, done.stderr
    except subprocess.TimeoutExpired as exc:
        stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        code, stderr = None, "time-out"
    except OSError as exc:
        raise TractEnvironmentError(f"cannot start {python} for tract {version}: {exc}") from exc
    current, phase = start, "starting"
    for line in stdout.splitlines():
        msg = json.loads(line)
        current, phase = int(msg["run"]), str(msg.get("phase", phase))
        if msg.get("ok") is True:
            with np.load(str(spec[current]["outputs"])) as data:
                results[current] = [data[f"output_{k}"] for k in range(len(data.files))]
        elif msg.get("ok") is False:
            results[current] = EngineError(
                f"tract {version} refused {spec[current]['path']} while {describe_phase(phase)}: "
                f"{msg['error']}", phase=phase)
    if current in results:
        return current + 1
    why = "did not answer in time" if code is None else f"died (exit status {code})"
    results[current] = EngineCrashedError(
        f"the tract {version} process {why} while {describe_phase(phase)} for "
        f"{spec[current]['path']}: {panic_summary(stderr)}. The crash is in the engine: this tract "
        "aborts on some graphs instead of refusing them", phase=phase)
    return current + 1


def panic_summary(stderr: str) -> str:
    """What tract said when it aborted: its panic lines, without the backtrace."""
    lines = stderr.strip().splitlines()
    at = next((i for i, line in enumerate(lines) if "panicked" in line), None)
    if at is None:
        return " ".join(lines[-3:]) or "no message"
    kept = [lines[at]] + [line for line in lines[at + 1:at + 4] if not line.lstrip().startswith(("stack", "0:"))]
    return " ".join(line.strip() for line in kept)


def run_in_tract_version(version: str, path: str | os.PathLike[str], inputs: Sequence[np.ndarray], *,
                         registries: Sequence[str] = (), symbols: Mapping[str, int] | None = None,
                         cache: Path | None = None) -> list[np.ndarray]:
    """Outputs of the artifact at ``path`` run in tract ``version``; raises its EngineError."""
    [result] = run_jobs(version, [TractJob(path, list(inputs), tuple(registries), symbols)], cache=cache)
    if isinstance(result, EngineError):
        raise result
    return result


def environments_enabled() -> bool:
    """``T2N_TRACT_ENVIRONMENTS=1``: check artifacts in the tract version they target."""
    return os.environ.get(SWITCH_VARIABLE, "").strip().lower() in ("1", "true", "yes")


def uses_environment(version: str) -> bool:
    """Whether a TractNNEF(version) run goes to that version's environment."""
    wanted = ".".join(str(p) for p in parse_version(version, "tract version"))
    return environments_enabled() and installed_tract_version() != wanted
