"""How check_io combines: compile does not run the engine unless asked, the drop-in entry
point does, an explicit compile(check_io=...) wins over the target's; and tract's tolerance
names with their documented limits. A deliberately wrong emitter shows the check can fail."""

from __future__ import annotations

import logging

import attrs
import numpy as np
import pytest
import torch
from torch import nn

import t2n
from t2n.backends.nnef.context import EmitContext, Raw
from t2n.check.compare import compare_one
from t2n.errors import CheckMismatchError
from t2n.ir import Op

X = torch.randn(4, 3)


def model() -> nn.Module:
    return nn.Sequential(nn.Linear(3, 8), nn.ReLU()).eval()


def relu_one_percent_high(ctx: EmitContext, op: Op) -> None:
    """Wrong on purpose: relu(x) * 1.01."""
    ctx.emit(op.output, "mul", Raw(ctx.call("relu", op.inputs[0])), 1.01)


def wrong(**options: object) -> t2n.TractNNEF:
    return t2n.TractNNEF.latest(**options).with_emitters({"relu": relu_one_percent_high}, override=True)


def test_compile_does_not_run_the_engine_by_default():
    artifact = t2n.compile(model(), X, wrong())
    assert "mul(relu(" in artifact.graph_nnef  # the wrong emitter is in, nobody checked it


def test_target_check_io_makes_compile_check():
    with pytest.raises(CheckMismatchError, match="tract 0.23.9 vs PyTorch at tolerance 'approximate': MISMATCH"):
        t2n.compile(model(), X, wrong(check_io=True))


def test_explicit_compile_check_io_wins_over_the_target():
    t2n.compile(model(), X, wrong(check_io=True), check_io=False)
    with pytest.raises(CheckMismatchError):
        t2n.compile(model(), X, wrong(check_io=False), check_io=True)


def test_target_tolerance_is_used_and_an_explicit_one_wins():
    t2n.compile(model(), X, wrong(check_io=True, check_io_tolerance="very"))
    with pytest.raises(CheckMismatchError, match="tolerance 'approximate'"):
        t2n.compile(model(), X, wrong(check_io=True, check_io_tolerance="very"), tolerance="approximate")


def test_drop_in_checks_by_default_and_keeps_the_artifact(tmp_path):
    with pytest.raises(CheckMismatchError) as info:
        t2n.export_model_to_nnef(model(), X, tmp_path / "m.nnef", wrong(), log_level=logging.WARNING)
    assert info.value.report.max_abs > 0
    assert (tmp_path / "m.nnef.tar").is_file()  # written, then found wrong: kept for study


def test_drop_in_check_off_by_the_target(tmp_path):
    path = t2n.export_model_to_nnef(model(), X, tmp_path / "m.nnef", wrong(check_io=False),
                                    log_level=logging.WARNING)
    assert path.is_file()


def test_drop_in_check_passes_on_a_right_artifact(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="t2n"):
        t2n.export_model_to_nnef(model(), X, tmp_path / "m.nnef", t2n.TractNNEF.latest())
    assert "all outputs match" in caplog.text


def test_export_follows_the_target_check_io(tmp_path):
    with pytest.raises(CheckMismatchError):
        t2n.export(model(), X, tmp_path / "m.tar", wrong(check_io=True))
    t2n.export(model(), X, tmp_path / "n.tar", wrong(check_io=True), check_io=False)
    t2n.export(model(), X, tmp_path / "o.tar", wrong())


def test_khronos_target_check_io_runs_its_interpreter():
    bad = t2n.KhronosNNEF("1.0.5", check_io=True).with_emitters({"relu": relu_one_percent_high}, override=True)
    with pytest.raises(CheckMismatchError, match="Khronos NNEF interpreter"):
        t2n.compile(model(), X, bad)
    t2n.compile(model(), X, attrs.evolve(bad, check_io=None))


# -- tolerances: tract's names and values ---------------------------------------------------

F32, F16 = np.dtype(np.float32), np.dtype(np.float16)


@pytest.mark.parametrize("name, dtype, limits, outliers", [
    ("exact", F32, (0.0, 0.0), 0.0),
    ("close", F32, (1e-7, 1e-7), 0.0),
    ("close", F16, (1e-3, 1e-3), 0.0),
    ("approximate", F32, (1e-4, 5e-4), 0.0),
    ("approximate", F16, (1e-3, 5e-3), 0.0),
    ("very", F32, (5e-2, 1e-2), 0.0),
    ("super", F32, (0.1, 0.05), 1e-4),
    ("ultra", F16, (0.2, 0.1), 5e-4),
    ("loose", F32, (1e-3, 1e-2), 0.0),
    ("very_loose", F32, (0.1, 0.1), 0.0),
    ("ultra", np.dtype(np.int32), (0.0, 0.0), 0.0),
])
def test_documented_limits(name, dtype, limits, outliers):
    tol = t2n.Tolerance.parse(name)
    assert tol.limits(dtype) == limits and tol.outlier_fraction(dtype) == outliers


def test_super_tolerates_its_outlier_fraction():
    ref = np.zeros(10_000, dtype=np.float32)
    one_off = ref.copy()
    one_off[0] = 5.0
    assert compare_one("y", one_off, ref, t2n.Tolerance.SUPER).ok      # 1 / 10000 = 1e-4
    assert not compare_one("y", one_off, ref, t2n.Tolerance.VERY).ok
    two_off = one_off.copy()
    two_off[1] = 5.0
    report = compare_one("y", two_off, ref, t2n.Tolerance.SUPER)
    assert not report.ok and report.mismatched == 2
    assert compare_one("y", two_off, ref, t2n.Tolerance.ULTRA).ok     # up to 5


def test_names_in_any_case_and_from_other_enums():
    import enum

    class Foreign(enum.StrEnum):
        ULTRA = "ultra"

    assert t2n.Tolerance.parse("SUPER") is t2n.Tolerance.SUPER
    assert t2n.Tolerance.parse(Foreign.ULTRA) is t2n.Tolerance.ULTRA
    assert t2n.TractCheckTolerance.CLOSE is t2n.Tolerance.CLOSE


@pytest.mark.parametrize("bad", ["approx", "tight", 1e-3, None])
def test_bad_tolerance_names_list_the_good_ones(bad):
    with pytest.raises(t2n.errors.InvalidArgumentError) as info:
        t2n.Tolerance.parse(bad)
    assert "'exact'" in str(info.value) and "'ultra'" in str(info.value)



@attrs.frozen
class NoEngine(t2n.TractNNEF):
    """A target of one's own that renders like tract but has no engine to run it."""

    run = t2n.Target.run


def test_targets_without_an_engine_are_not_checked_by_default(tmp_path):
    path = t2n.export_model_to_nnef(model(), X, tmp_path / "m.nnef", NoEngine(), log_level=logging.WARNING)
    assert path.is_file()
    with pytest.raises(t2n.errors.InvalidArgumentError, match="cannot run an artifact"):
        t2n.export_model_to_nnef(model(), X, tmp_path / "n.nnef", NoEngine(check_io=True))
    assert not (tmp_path / "n.nnef.tar").exists()
