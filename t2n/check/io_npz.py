"""Sample steps in one ``.npz`` (``io.npz``): several runs of one graph (an LLM's
prefill, then its decode steps) with their inputs and the reference outputs, so an
engine can replay each run and compare.

Keys are ``STEP/inputs/NAME`` and ``STEP/outputs/NAME`` (NAME: the graph's input and
output names); steps replay in the order the file holds them. Other keys (such as
``tokens``) are kept for the reader and ignored by the replay.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from t2n.errors import InvalidArgumentError

KINDS = ("inputs", "outputs")


@attrs.frozen
class IOStep:
    """One run of the graph: arrays by input name, and the reference by output name."""

    name: str
    inputs: dict[str, np.ndarray]
    outputs: dict[str, np.ndarray]

    def arrays(self, input_names: Sequence[str], output_names: Sequence[str], where: str = "io.npz"
               ) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """The inputs and outputs in the graph's order (for ``Artifact.check(inputs=,
        expected=)``), each name checked to be there."""
        for kind, names, held in (("inputs", input_names, self.inputs), ("outputs", output_names, self.outputs)):
            missing = [n for n in names if n not in held]
            if missing:
                raise InvalidArgumentError(
                    f"{where}: step {self.name!r} has no {kind} {', '.join(missing)} (it holds "
                    f"{', '.join(held) or 'none'}); write every graph {kind[:-1]} under "
                    f"{self.name}/{kind}/NAME")
        return [self.inputs[n] for n in input_names], [self.outputs[n] for n in output_names]


def write_io_npz(path: str | os.PathLike[str], steps: Sequence[IOStep], **extra: np.ndarray) -> None:
    """Write ``steps`` (and ``extra`` arrays under their own keys) to ``path``."""
    arrays: dict[str, Any] = {}
    for step in steps:
        for kind, held in zip(KINDS, (step.inputs, step.outputs)):
            arrays.update({f"{step.name}/{kind}/{n}": a for n, a in held.items()})
    arrays.update(extra)
    np.savez(Path(path), **arrays)


def read_io_npz(path: str | os.PathLike[str]) -> list[IOStep]:
    """The steps of an ``io.npz``, in the file's order."""
    p = Path(path)
    try:
        with np.load(p, allow_pickle=False) as npz:
            found = {k: npz[k] for k in npz.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise InvalidArgumentError(f"{p}: cannot read it as a .npz file ({type(exc).__name__}: {exc}); "
                                   "write it with t2n.check.io_npz.write_io_npz") from exc
    steps: dict[str, IOStep] = {}
    for key, array in found.items():
        parts = key.split("/")
        if len(parts) != 3 or parts[1] not in KINDS:
            continue
        step = steps.setdefault(parts[0], IOStep(parts[0], {}, {}))
        (step.inputs if parts[1] == "inputs" else step.outputs)[parts[2]] = array
    if not steps:
        raise InvalidArgumentError(
            f"{p} holds no steps (keys STEP/inputs/NAME and STEP/outputs/NAME; it has "
            f"{', '.join(list(found)[:6]) or 'no arrays'}); give the io.npz an LLM export wrote "
            "(OUT/tests/io.npz), or use --inputs/--outputs for single runs")
    return list(steps.values())
