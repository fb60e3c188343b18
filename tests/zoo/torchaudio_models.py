"""torchaudio's model classes in the zoo (group ``torchaudio``)."""

from __future__ import annotations

from .entry import Entry

TORCHAUDIO: list[Entry] = []
