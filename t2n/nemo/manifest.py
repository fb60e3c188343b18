"""``manifest.json``: what a NeMo export folder holds and how an application drives it.

One JSON object: ``format`` (``"t2n-nemo-asr"`` for a speech recognizer,
``"t2n-nemo-classifier"`` for a classifier) and ``version``; the ``model`` (NeMo class and
kind); the ``audio`` front (sample rate, features, hop, subsampling); a recognizer's
``decoding`` facts (vocabulary, blank id, durations, symbols per frame, the prediction
network's state) or a classifier's ``classes`` (labels, what its decoder outputs, the
length of a frame); and per artifact its file, its interface (inputs, outputs, symbols,
assertions), NeMo's interface it came from, the remodel plan applied with what each
pass did, and the checks run in tract. See ``docs/speech.md``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from t2n.errors import NemoManifestError

FILE = "manifest.json"
FORMAT = "t2n-nemo-asr"
CLASSIFIER_FORMAT = "t2n-nemo-classifier"
VERSION = 1

READERS = {
    FORMAT: ("a NeMo speech recognizer", "load it with t2n.nemo.load(folder), or run t2n nemo-transcribe "
                                         "FOLDER AUDIO"),
    CLASSIFIER_FORMAT: ("a NeMo classifier", "load it with t2n.nemo.load_classifier(folder), or run t2n "
                                             "nemo-classify FOLDER AUDIO"),
}
"""What each format holds and what reads it: named when a folder of one is given to the other."""


@attrs.frozen
class ArtifactEntry:
    name: str
    path: str
    data: Mapping[str, Any]

    @property
    def input_names(self) -> list[str]:
        return [i["name"] for i in self.data["inputs"]]

    @property
    def output_names(self) -> list[str]:
        return [o["name"] for o in self.data["outputs"]]

    def input_dtype(self, name: str) -> str:
        return str(next(i["dtype"] for i in self.data["inputs"] if i["name"] == name))


@attrs.frozen
class Manifest:
    data: Mapping[str, Any]
    folder: Path | None = None

    @property
    def kind(self) -> str:
        return str(self.data["model"]["kind"])

    @property
    def decoding(self) -> Mapping[str, Any]:
        return self.data["decoding"]  # type: ignore[no-any-return]

    @property
    def artifacts(self) -> dict[str, ArtifactEntry]:
        return {n: ArtifactEntry(n, a["path"], a) for n, a in self.data["artifacts"].items()}

    def artifact(self, name: str) -> ArtifactEntry:
        found = self.artifacts.get(name)
        if found is None:
            raise NemoManifestError(f"the export has no {name} artifact (it has {', '.join(self.artifacts)})")
        return found

    def path_of(self, name: str) -> Path:
        if self.folder is None:
            raise NemoManifestError("this manifest was not read from a folder")
        return self.folder / self.artifact(name).path

    def to_json(self) -> str:
        return json.dumps(self.data, indent=2, sort_keys=False) + "\n"

    @classmethod
    def load(cls, folder: str | os.PathLike[str], expected: str = FORMAT) -> Manifest:
        """The manifest of an export folder of format ``expected``; every artifact it lists must be
        there. A folder of the other format is refused, naming what reads it."""
        root = Path(folder)
        path = root / FILE
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise NemoManifestError(f"{root} has no {FILE}: it is not a NeMo export t2n wrote") from None
        except (OSError, json.JSONDecodeError) as exc:
            raise NemoManifestError(f"cannot read {path}: {exc}") from exc
        found = data.get("format") if isinstance(data, dict) else None
        if found != expected:
            if found in READERS and expected in READERS:
                (what, how), wanted = READERS[found], READERS[expected][0]
                raise NemoManifestError(f"{root} is the export of {what} ({found}), not of {wanted}: {how}")
            raise NemoManifestError(f"{path} is not a {expected} manifest")
        if data.get("version") != VERSION:
            raise NemoManifestError(f"{path} is version {data.get('version')}; this t2n reads version {VERSION}")
        manifest = cls(data, root)
        for name, entry in manifest.artifacts.items():
            if not (root / entry.path).exists():
                raise NemoManifestError(f"{path} lists {name} at {entry.path}, which is missing")
        return manifest


def is_export_folder(folder: Path) -> bool:
    """Whether ``folder`` holds only a NeMo export t2n wrote (its manifest and the
    artifacts it lists), of either format: such a folder may be replaced by a new export."""
    for expected in READERS:
        try:
            manifest = Manifest.load(folder, expected)
            break
        except NemoManifestError:
            continue
    else:
        return False
    listed = {FILE} | {e.path for e in manifest.artifacts.values()}
    return all(entry.name in listed for entry in os.scandir(folder))
