import contextlib
import os
import subprocess

import numpy as np
import pytest
import torch

os.environ.setdefault("OMP_NUM_THREADS", "1")
torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    np.random.seed(0)


def pytest_addoption(parser):
    parser.addoption(
        "--t2n-evidence", default=None,
        help="record which aten ops each target ran or refused, as JSON at this path "
             "(input of `python -m t2n.frontend.coverage`; run without -n)",
    )


def pytest_configure(config):
    if config.getoption("--t2n-evidence"):
        import t2n.testing

        t2n.testing.EVIDENCE = t2n.testing.Evidence()


def pytest_sessionfinish(session, exitstatus):
    path = session.config.getoption("--t2n-evidence")
    if path:
        import json

        import t2n.testing

        with open(path, "w") as f:
            json.dump(t2n.testing.EVIDENCE.to_json(), f, indent=1, sort_keys=True)
            f.write("\n")


@contextlib.contextmanager
def tmpfs(where, options):
    """A small tmpfs mounted at ``where`` (a real full disk or read-only file system: root
    writes through chmod, not through these). Where mounting is not permitted the test
    is skipped, except under CI (``CI=true``, run as root), where it must work."""
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        why = f"cannot mount a tmpfs here ({done.stderr.strip()}): needs root with CAP_SYS_ADMIN"
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False)
