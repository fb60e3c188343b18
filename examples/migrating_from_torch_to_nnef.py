"""A script written for the widely used PyTorch → NNEF exporter, run with t2n.

Run it:  python examples/migrating_from_torch_to_nnef.py [OUTPUT_DIR]

Only the import line marked below differs from the original script; every call,
keyword and default is the original's (see docs/migrating.md for the mapping and the
few places where t2n behaves differently, and why).
"""

from __future__ import annotations

import logging
import sys
import tempfile
from pathlib import Path

import torch
from torch import nn

# -- the only line that changes (it replaces the three imports of the other exporter) ----
from t2n import KhronosNNEF, SemanticVersion, TractCheckTolerance, TractNNEF, export_model_to_nnef

# -------------------------------------------------------------------------------------


class KeywordSpotter(nn.Module):
    """A small streaming-style model: conv front end, GRU-free pooling, attention head."""

    def __init__(self) -> None:
        super().__init__()
        self.front = nn.Sequential(nn.Conv1d(10, 16, 3, padding=1), nn.ReLU())
        self.attention = nn.MultiheadAttention(16, 2, batch_first=True)
        self.head = nn.Linear(16, 4)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        x = self.front(features).transpose(1, 2)
        x, _ = self.attention(x, x, x, need_weights=False)
        return self.head(x).softmax(-1)


def main(out_dir: str | Path | None = None) -> list[Path]:
    out = Path(out_dir) if out_dir is not None else Path(tempfile.mkdtemp(prefix="nnef-migrating-"))
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = KeywordSpotter().eval()
    test_input = torch.rand(1, 10, 50)

    # pinned tract version, dynamic time axis, tract's own attention op, checked at export
    tract_target = TractNNEF(
        SemanticVersion.from_str("0.23.0"),
        check_io=True,
        check_io_tolerance=TractCheckTolerance.APPROXIMATE,
        dynamic_axes={"input": {2: "S"}},
        specific_properties={"model_name": "keyword_spotter", "sample_rate": "16000"},
        reify_sdpa_operator=True,
    )
    tract_path = export_model_to_nnef(
        model=model,
        args=test_input,
        file_path_export=out / "keyword_spotter.nnef.tgz",
        inference_target=tract_target,
        input_names=["input"],
        output_names=["output"],
        compression_level=1,
        log_level=logging.WARN,
        custom_extensions=["tract_assert S <= 1000"],
    )

    # the same model for strict Khronos NNEF consumers, as a directory
    khronos_path = export_model_to_nnef(
        model=model,
        args=(test_input,),
        file_path_export=out / "keyword_spotter_khronos.nnef",
        inference_target=KhronosNNEF.latest(),
        input_names=["input"],
        output_names=["output"],
        compression_level=None,
        log_level=logging.WARN,
    )
    for path in (tract_path, khronos_path):
        print(f"exported and checked: {path}")
    return [tract_path, khronos_path]


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
