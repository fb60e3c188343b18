"""diffusers' model classes in the zoo (group ``diffusers``)."""

from __future__ import annotations

from .entry import Entry

DIFFUSERS: list[Entry] = []
