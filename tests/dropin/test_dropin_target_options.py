"""TractNNEF / KhronosNNEF options of the drop-in API: latest(), versions as objects,
properties read back from tract, feature flags, and the typed errors of each option."""

from __future__ import annotations

import logging
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch
from packaging.version import Version
from torch import nn

import t2n
from t2n.backends.tract.target import TRACT_LATEST
from t2n.errors import InvalidArgumentError

X = torch.rand(2, 3)


def linear() -> nn.Module:
    return nn.Linear(3, 4).eval()


def test_latest_is_the_newest_supported_tract():
    target = t2n.TractNNEF.latest()
    assert target.version == TRACT_LATEST == t2n.TractNNEF().version
    assert t2n.TractNNEF.latest(check_io=False).check_io is False
    assert t2n.KhronosNNEF.latest().version == "1.0.5"


@pytest.mark.parametrize("given", [
    "0.22.0", t2n.SemanticVersion.from_str("0.22.0"), t2n.SemanticVersion(0, 22, 0), Version("0.22.0"),
    (0, 22, 0), (0, 22), SimpleNamespace(major=0, minor=22, patch=0), SimpleNamespace(major=0, minor=22, micro=0),
])
def test_version_as_text_or_object(given):
    target = t2n.TractNNEF(given)
    assert target.version == "0.22.0"
    assert target == t2n.TractNNEF("0.22.0")
    assert target.at_least("0.22.0") and not target.at_least("0.23.0")


def test_semantic_version_compares_with_text():
    v = t2n.SemanticVersion.from_str("1.2.13")
    assert "1.2.12" < v < "1.2.14" and v == "1.2.13" and not v > "1.3.0"
    assert str(v) == v.to_str() == "1.2.13"


@pytest.mark.parametrize("given, message", [
    (object(), "TractNNEF version must be a string"),
    ((0, -1, 0), "TractNNEF version must be a string"),
    ((0,), "TractNNEF version must be a string"),
    (SimpleNamespace(major=0, minor="22", patch=0), "major, minor and patch"),
    (0.22, "0.20 and 0.2 are the same float"),
    ("0.21.x", "cannot read TractNNEF version '0.21.x'"),
    (t2n.SemanticVersion(0, 18, 0), "tract 0.19 and newer"),
])
def test_bad_versions(given, message):
    with pytest.raises(InvalidArgumentError) as info:
        t2n.TractNNEF(given)
    assert message in str(info.value)


def test_bad_semantic_version_text():
    with pytest.raises(InvalidArgumentError, match="cannot read version '1.x'"):
        t2n.SemanticVersion.from_str("1.x")


def test_khronos_version_and_check_io_positional():
    target = t2n.KhronosNNEF(t2n.SemanticVersion.from_str("1.0.5"), True)
    assert target.version == "1.0.5" and target.check_io is True
    with pytest.raises(InvalidArgumentError, match="supports NNEF 1.0.5"):
        t2n.KhronosNNEF((2, 0))
    with pytest.raises(InvalidArgumentError, match="check_io must be True or False"):
        t2n.KhronosNNEF("1.0.5", "yes")


_READ_PROPERTIES = """
import sys, tract
model = tract.nnef().load(sys.argv[1])
for key in model.property_keys():
    print(key, "=", str(model.property(key)))
"""


def tract_properties(path) -> dict[str, str]:
    """Properties as tract reads them (in a child process: tract aborts the process on
    some property reads)."""
    out = subprocess.run([sys.executable, "-c", _READ_PROPERTIES, str(path)], capture_output=True, text=True,
                         check=True).stdout
    return dict(line.split(" = ", 1) for line in out.splitlines())


def test_specific_properties_are_read_by_tract(tmp_path):
    target = t2n.TractNNEF.latest(specific_properties={"model_name": "tiny", "max_tokens": "4096"})
    path = t2n.export_model_to_nnef(linear(), X, tmp_path / "m.nnef", target, compression_level=None,
                                    log_level=logging.WARNING)
    props = tract_properties(path)
    assert "tiny" in props["model_name"] and "4096" in props["max_tokens"]
    assert "t2n_version" in props and "hostname" not in props and "user" not in props


def test_identity_properties_only_when_asked(tmp_path):
    model = linear()
    plain = [t2n.compile(model, X, t2n.TractNNEF.latest()).graph_nnef for _ in range(2)]
    assert plain[0] == plain[1]  # deterministic by default
    target = t2n.TractNNEF.latest(dump_identity_properties=True)
    artifact = t2n.compile(model, X, target)
    artifact.save(tmp_path / "id.nnef")
    props = tract_properties(tmp_path / "id.nnef")
    assert {"hostname", "user", "os", "py_version", "export_date", "export_cmd"} <= set(props)
    assert artifact.check().ok


@pytest.mark.parametrize("given, message", [
    (["a", "b"], "must be a dict"),
    ({1: "a"}, "property 1"),
    ({"a": 1}, "property 'a' = 1"),
    ({"t2n_version": "9"}, "written by t2n itself"),
    ({"a": "b\nc"}, "control character"),
])
def test_bad_specific_properties(given, message):
    with pytest.raises(InvalidArgumentError) as info:
        t2n.TractNNEF(specific_properties=given)
    assert "specific_properties" in str(info.value) and message in str(info.value)


@pytest.mark.parametrize("given, expected", [
    (None, frozenset()), ({"default"}, frozenset({"default"})),
    ({t2n.TractFeatureFlag.COMPLEX}, frozenset({"complex"})), ("default", frozenset({"default"})),
])
def test_feature_flags(given, expected):
    assert t2n.TractNNEF(feature_flags=given).feature_flags == expected


@pytest.mark.parametrize("given, message", [
    ({"fast"}, "unknown flag(s) 'fast'; tract's flags are complex, default"),
    (3, "must be a set of flag names"),
])
def test_bad_feature_flags(given, message):
    with pytest.raises(InvalidArgumentError) as info:
        t2n.TractNNEF(feature_flags=given)
    assert message in str(info.value)


@pytest.mark.parametrize("option", ["reify_sdpa_operator", "upsample_with_debox", "dump_identity_properties"])
def test_flags_must_be_bool(option):
    with pytest.raises(InvalidArgumentError, match=rf"TractNNEF\({option}=...\) must be True or False"):
        t2n.TractNNEF(**{option: "yes"})


@pytest.mark.parametrize("given, expected", [
    ("super", t2n.Tolerance.SUPER), (t2n.TractCheckTolerance.ULTRA, t2n.Tolerance.ULTRA),
    ("VERY", t2n.Tolerance.VERY), ("close", t2n.Tolerance.CLOSE),
])
def test_check_io_tolerance_takes_tract_names(given, expected):
    assert t2n.TractNNEF(check_io_tolerance=given).check_io_tolerance is expected


def test_bad_check_io_tolerance():
    with pytest.raises(InvalidArgumentError) as info:
        t2n.TractNNEF(check_io_tolerance="tight")
    assert "'super'" in str(info.value) and "'tight'" in str(info.value)


@pytest.mark.parametrize("given", ["yes", 1, 0.0])
def test_bad_check_io(given):
    with pytest.raises(InvalidArgumentError, match="check_io must be True or False"):
        t2n.TractNNEF(check_io=given)


def test_khronos_drop_in_export_checks_in_the_khronos_interpreter(tmp_path):
    path = t2n.export_model_to_nnef(linear(), X, tmp_path / "k.nnef", t2n.KhronosNNEF("1.0.5"),
                                    compression_level=None, log_level=logging.WARNING)
    assert (path / "graph.nnef").read_text().startswith("version 1.0;")


def test_identity_properties_stay_on_one_line(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["train.py", "--note", "two\nlines"])
    artifact = t2n.compile(linear(), X, t2n.TractNNEF.latest(dump_identity_properties=True))
    line = next(line for line in artifact.graph_nnef.splitlines() if '"export_cmd"' in line)
    assert "train.py --note two lines" in line
    assert artifact.check().ok
