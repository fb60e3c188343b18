"""Every test here builds or exports tiny NeMo models: skipped, by name, where NeMo's ASR
collection does not import."""

from __future__ import annotations

import pytest
from nemo_asr_cases import nemo_or_skip


@pytest.fixture(autouse=True, scope="module")
def nemo_asr():
    return nemo_or_skip()
