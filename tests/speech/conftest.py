import pytest

from .nemo_models import nemo_or_skip


@pytest.fixture(autouse=True, scope="session")
def nemo_asr():
    """Every test here needs NeMo (skipped without it, except under CI)."""
    return nemo_or_skip()
