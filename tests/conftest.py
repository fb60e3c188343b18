import contextlib
import functools
import os
import pathlib
import subprocess
import types

import frontend_parity
import numpy as np
import pytest
import torch
from slow_cases import SLOW_CASES

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
             "(input of `python -m tools.operator_table`; run without -n)",
    )
    parser.addoption(
        "--t2n-parity", default=None,
        help="record each case's outcome per frontend and target, as JSON at this path "
             "(input of `python -m tools.parity_table`; works with -n)",
    )
    parser.addoption(
        "--t2n-export-all", action="store_true",
        help="run every case through the export frontend too (by default: the first case of "
             "each test function, less those tests/frontend_parity.py EXPORT_SLOW lists)",
    )


def pytest_configure(config):
    global PARITY
    if config.getoption("--t2n-parity"):
        PARITY = {}
    if config.getoption("--t2n-evidence"):
        import t2n.testing

        t2n.testing.EVIDENCE = t2n.testing.Evidence()


# -- both frontends over the layer, architecture and dynamic-axes suites ------------

PARITY_SUITES = ("layers", "architectures", "dynamic")
TESTS = pathlib.Path(__file__).parent


def _in_parity_suites(path):
    parts = pathlib.Path(path).relative_to(TESTS).parts
    return len(parts) > 1 and parts[0] in PARITY_SUITES


@pytest.hookimpl(trylast=True)
def pytest_generate_tests(metafunc):
    """Every case of the parity suites runs once per frontend (ids ``[...-jit]`` and
    ``[...-export]``), except the functions ``JIT_ONLY`` lists."""
    import t2n.testing

    if "t2n_frontend" not in metafunc.fixturenames or not _in_parity_suites(metafunc.definition.path):
        return
    name = f"{metafunc.definition.nodeid.split('::')[0]}::{metafunc.function.__name__}"
    if frontend_parity.match(frontend_parity.JIT_ONLY, name) is None:
        metafunc.parametrize("t2n_frontend", t2n.testing.FRONTENDS, indirect=True)


def _frontend_of(item):
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("t2n_frontend") if callspec is not None else None


def _first_case(item):
    """The first parameter set of its test function (every case of an unparametrised one)."""
    return all(i == 0 for name, i in item.callspec.indices.items() if name != "t2n_frontend")


def _runs_the_command(item) -> bool:
    """A test of the ``t2n`` command (run in the test's process, or in a child for the
    console script): it takes the ``t2n_cli`` fixture or calls ``make_runner`` itself."""
    if "t2n_cli" in getattr(item, "fixturenames", ()):
        return True
    code = getattr(getattr(item, "function", None), "__code__", None)
    return code is not None and "make_runner" in _names_used(code)


@functools.cache
def _names_used(code: types.CodeType) -> frozenset[str]:
    """The global and attribute names a function's code (nested functions included) uses:
    read from its code object, as reading its source for each of 4000 cases took seconds."""
    inner = (c for c in code.co_consts if isinstance(c, types.CodeType))
    return frozenset(code.co_names).union(*map(_names_used, inner))


def pytest_collection_modifyitems(config, items):
    """Export cases ``EXPORT_XFAIL`` lists are strict xfails. By default each test
    function runs its first case through the export frontend; the others, and the ones
    ``EXPORT_SLOW`` lists, are marked slow and left out unless ``--t2n-export-all``."""
    kept, left_out = [], []
    for item in items:
        if item.nodeid.split("[", 1)[0] in SLOW_CASES:
            item.add_marker(pytest.mark.slow)
        if _runs_the_command(item):
            item.add_marker(pytest.mark.cli_command)
        if _frontend_of(item) == "export":
            reason = frontend_parity.match(frontend_parity.EXPORT_XFAIL, item.nodeid)
            if reason is not None:
                item.add_marker(pytest.mark.xfail(strict=True, reason=f"export frontend: {reason}"))
            if not _first_case(item) or frontend_parity.match(frontend_parity.EXPORT_SLOW, item.nodeid):
                item.add_marker(pytest.mark.slow)
                if not config.getoption("--t2n-export-all"):
                    left_out.append(item)
                    continue
        kept.append(item)
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = kept


@pytest.fixture(autouse=True, scope="module")
def _nemo_for_nemo_tests(request):
    """Every module of tests/nemo builds or exports tiny NeMo models: skipped, by name,
    where NeMo's ASR collection does not import. (Here and not in a tests/nemo/conftest.py:
    that directory is not a package, and a second top-level ``conftest`` module would
    shadow this one's helpers for ``from conftest import ...``.)"""
    if request.node.path.parent.name == "nemo":
        from speech.nemo_models import nemo_or_skip

        nemo_or_skip()


@pytest.fixture(autouse=True)
def t2n_frontend(request):
    """The frontend ``t2n.testing``'s helpers compile with in this test (``jit`` outside
    the parity suites)."""
    import t2n.testing

    frontend = getattr(request, "param", "jit")
    t2n.testing.RUN = t2n.testing.HelperRun(frontend=frontend)
    yield frontend
    t2n.testing.RUN = t2n.testing.HelperRun()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Attach what the helpers did to the report (for ``--t2n-parity``); an export case
    that passed without compiling through the helpers proved nothing: it fails."""
    import t2n.testing

    outcome = yield
    report = outcome.get_result()
    frontend = _frontend_of(item)
    if report.when != "call" or (frontend is None and not _in_parity_suites(item.path)):
        return
    run = t2n.testing.RUN
    props = {"frontend": frontend or "jit", "targets": dict(run.targets)}
    if frontend is None:
        props["jit_only"] = frontend_parity.match(frontend_parity.JIT_ONLY, item.nodeid.split("[")[0])
    if call.excinfo is not None and not report.passed:
        props["error"] = f"{call.excinfo.typename}: {str(call.excinfo.value)[:300]}"
    report.user_properties.append(("t2n_parity", props))
    if frontend == "export" and report.passed and run.compiles == 0:
        report.outcome = "failed"
        report.longrepr = (f"{item.nodeid}: no t2n.testing helper compiled with the {frontend} frontend; "
                           "list the function in tests/frontend_parity.py JIT_ONLY, with the reason")


def pytest_runtest_logreport(report):
    if PARITY is None:
        return
    props = dict(report.user_properties).get("t2n_parity")
    if report.when == "call" and props is not None:
        PARITY[report.nodeid] = {**props, "outcome": _outcome(report)}
        if hasattr(report, "wasxfail"):
            PARITY[report.nodeid]["reason"] = report.wasxfail
    elif report.when == "setup" and not report.passed and "t2n_frontend" in report.keywords:
        PARITY[report.nodeid] = {"frontend": _frontend_from_id(report.nodeid), "targets": {},
                                 "outcome": _outcome(report)}


def _outcome(report):
    if hasattr(report, "wasxfail"):
        return "xfailed" if report.skipped else "xpassed"
    return report.outcome


def _frontend_from_id(nodeid):
    return "export" if nodeid.endswith(("-export]", "[export]")) else "jit"


PARITY = None


def pytest_sessionfinish(session, exitstatus):
    parity_path = session.config.getoption("--t2n-parity")
    if parity_path and PARITY is not None and not hasattr(session.config, "workerinput"):
        import json

        with open(parity_path, "w") as f:
            json.dump(dict(sorted(PARITY.items())), f, indent=1)
            f.write("\n")
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
