"""Where ``export_model_to_nnef`` writes, from the path's suffix and ``compression_level``.

- a path ending in ``.tgz``/``.tar.gz`` is the archive itself: gzip at
  ``compression_level`` 1..9 (6 when ``None``); ``0`` means no compression, so the
  file is an uncompressed tar under that name (tract and Python's ``tarfile`` read an
  archive by its content, not its name);
- a path ending in ``.tar`` is an uncompressed archive (``compression_level`` 0 or
  ``None``; 1..9 would make a ``.tar`` that is not one, and is refused);
- any other path (``model.nnef``, ``out/model``) is a base path: ``None`` writes a
  directory there, ``0`` the archive ``<path>.tar``, ``1..9`` ``<path>.tgz`` at that
  level.
"""

from __future__ import annotations

import os
from pathlib import Path

from t2n.errors import InvalidArgumentError
from t2n.serialize.archive import artifact_form

_GZIP_SUFFIXES = (".tgz", ".tar.gz")


def check_compression_level(level: object) -> int | None:
    if level is None:
        return None
    if isinstance(level, int) and not isinstance(level, bool) and 0 <= level <= 9:
        return level
    raise InvalidArgumentError(
        f"compression_level must be None (a directory), 0 (an uncompressed .tar) or 1..9 "
        f"(a .tgz at that gzip level), got {type(level).__name__} {level!r}"
    )


def destination(file_path_export: object, compression_level: object) -> tuple[Path, int | None]:
    """(the artifact's path, the ``compression_level`` to write it with)."""
    if not isinstance(file_path_export, (str, os.PathLike)):
        raise InvalidArgumentError(
            f"file_path_export must be a str or a path such as 'model.nnef.tgz', got "
            f"{type(file_path_export).__name__} {file_path_export!r}"
        )
    level = check_compression_level(compression_level)
    name = os.fspath(file_path_export)
    if not isinstance(name, str) or not name.strip():
        raise InvalidArgumentError(f"file_path_export must name a file or folder, got {file_path_export!r}")
    lower = name.lower()
    if lower.endswith(_GZIP_SUFFIXES):
        return Path(name), level
    if lower.endswith(".tar"):
        if level not in (None, 0):
            raise InvalidArgumentError(
                f"file_path_export {name!r} ends in '.tar' (an uncompressed archive) but "
                f"compression_level={level} asks for gzip: name it '.tgz' (or '.tar.gz'), or "
                "pass compression_level=0"
            )
        return Path(name), 0
    artifact_form(name)  # refuses suffixes that are no artifact form (.zip, .onnx ...)
    if level is None:
        return Path(name), None
    return Path(name + (".tar" if level == 0 else ".tgz")), level
