"""Largest error of each architecture of the test suite against PyTorch, per engine.

    python benchmarks/accuracy.py

Builds the models of ``tests/architectures`` (tiny configs, random weights), exports them
for tract and Khronos NNEF, runs both engines and prints the largest absolute error over
all outputs. A table for closing notes and release notes; the tests assert tolerances.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "architectures"))

import test_transformers as tt  # noqa: E402
import test_vision as tv  # noqa: E402

from t2n.testing import check_export  # noqa: E402


def vision() -> list[tuple[str, torch.nn.Module, tuple[torch.Tensor, ...]]]:
    torch.manual_seed(0)
    return [("ResNet-18-like", tv.randomized(tv.ResNet18Like()), (torch.randn(1, 3, 64, 64),)),
            ("MobileNetV2-like", tv.randomized(tv.MobileNetV2Like()), (torch.randn(2, 3, 32, 32),)),
            ("small UNet", tv.randomized(tv.SmallUNet()), (torch.randn(1, 3, 32, 32),)),
            ("ViT-like encoder", tv.ViTLike().eval(), (torch.randn(2, 3, 16, 16),))]


def worst(report: object) -> float:
    return max(float(o.max_abs) for o in report.outputs)  # type: ignore[attr-defined]


def main() -> None:
    warnings.simplefilter("ignore")
    rows = []
    for name, model, args in vision():
        res = check_export(model, args)
        rows.append((name, "f32", worst(res.reports["tract"]), worst(res.reports["khronos"])))
    for name in tt.MODELS:
        model, args, kwargs = tt.instantiate(name)
        res = check_export(model, args, kwargs=kwargs)
        rows.append((name, "f32", worst(res.reports["tract"]), worst(res.reports["khronos"])))
    for name in ["llama", "gpt2", "bert", "qwen2"]:
        model, args, kwargs = tt.instantiate(name)
        model = model.half()
        args = tuple(a.half() if a.is_floating_point() else a for a in args)
        res = check_export(model, args, kwargs=kwargs, targets=("tract",))
        rows.append((name, "f16", worst(res.reports["tract"]), None))
    print("| model | dtype | tract max abs error | Khronos max abs error |")
    print("|---|---|---|---|")
    for name, dt, t, k in rows:
        print(f"| {name} | {dt} | {t:.2e} | {'-' if k is None else f'{k:.2e}'} |")


if __name__ == "__main__":
    main()
