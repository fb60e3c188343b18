"""Qwen2-VL, Qwen2.5-VL and Qwen3-VL: an encoder fixed to one image grid a size (the window
partition and position tables computed for it at export), 3-D rotary positions for the
decoder, and Qwen3-VL's DeepStack streams."""

from __future__ import annotations

from typing import Any

import attrs
import torch

from t2n.llm.common.checkpoint import config_of
from t2n.llm.multimodal.family import Family, placeholders, pooled


def _qwen_inputs(model: Any, example: tuple[torch.Tensor, ...], ids: torch.Tensor,
                 size: tuple[int, int] | None = None) -> dict[str, torch.Tensor]:
    return {"pixel_values": example[0], "image_grid_thw": torch.tensor([[1, *_qwen_grid_of(model, size)]]),
            "mm_token_type_ids": placeholders(model, ids).int()}


DEFAULT_PIXELS = 224
"""The side of the image an encoder without windows or learned positions is exported at
(as Qwen2.5-VL's two windows a side): other sizes through ``image_sizes``."""


def qwen_patch_grid(model: torch.nn.Module) -> tuple[int, int]:
    """The patch grid (rows, columns) an image is exported at: two attention windows a
    side (224 x 224 pixels for Qwen2.5-VL's 14 px patches and 112 px windows); for
    Qwen3-VL (no windows) the grid of its learned position embeddings (48 x 48 patches);
    for Qwen2-VL (neither) 224 x 224 pixels too (16 x 16 patches of 14 px), rounded down
    to whole merges."""
    vision = config_of(model).vision_config
    learned = getattr(vision, "num_position_embeddings", None)
    if getattr(vision, "window_size", None) is None and isinstance(learned, int):
        side = int(round(learned ** 0.5))
        return side, side
    merge, patch = int(vision.spatial_merge_size), int(vision.patch_size)
    window = getattr(vision, "window_size", None)
    side = 2 * max(1, int(window) // patch) if window else DEFAULT_PIXELS // patch // merge * merge
    side = max(side, 2 * merge)
    return side, side


def _qwen_merged_grid(model: torch.nn.Module) -> tuple[int, int]:
    vision = config_of(model).vision_config
    rows, columns = qwen_patch_grid(model)
    return rows // int(vision.spatial_merge_size), columns // int(vision.spatial_merge_size)


def _qwen_example(model: torch.nn.Module, size: tuple[int, int] | None = None) -> tuple[torch.Tensor, ...]:
    vision = config_of(model).vision_config
    rows, columns = _qwen_grid_of(model, size)
    width = int(vision.in_channels) * int(vision.temporal_patch_size) * int(vision.patch_size) ** 2
    return (torch.randn((rows * columns, width), generator=torch.Generator().manual_seed(0)),)


def _qwen_size(model: torch.nn.Module) -> tuple[int, int]:
    """The pixel size of the default grid (patches of ``patch_size`` pixels)."""
    vision = config_of(model).vision_config
    rows, columns = qwen_patch_grid(model)
    return rows * int(vision.patch_size), columns * int(vision.patch_size)


def _qwen_grid_of(model: torch.nn.Module, size: tuple[int, int] | None) -> tuple[int, int]:
    """The patch grid (rows, columns) of an image of ``size`` pixels (None: the default)."""
    if size is None:
        return qwen_patch_grid(model)
    vision = config_of(model).vision_config
    patch = int(vision.patch_size)
    return size[0] // patch, size[1] // patch


def _qwen_check(model: torch.nn.Module, size: tuple[int, int]) -> str:
    vision = config_of(model).vision_config
    step = int(vision.patch_size) * int(vision.spatial_merge_size)
    if any(s <= 0 or s % step for s in size):
        return f"a side is not a multiple of patch_size * spatial_merge_size = {step} pixels (the processor's resize)"
    return ""


def qwen_grid_positions(model: torch.nn.Module, size: tuple[int, int] | None) -> torch.Tensor:
    """``[rows * columns, 4]`` int64: each merged patch's (row, column, rows, columns) in
    its image, in the order of the encoder's rows (row-major over the merged grid)."""
    vision = config_of(model).vision_config
    merge = int(vision.spatial_merge_size)
    rows, columns = (n // merge for n in _qwen_grid_of(model, size))
    row, column = torch.meshgrid(torch.arange(rows), torch.arange(columns), indexing="ij")
    return torch.stack([row.flatten(), column.flatten(), torch.full((rows * columns,), rows),
                        torch.full((rows * columns,), columns)], dim=1)


def _qwen_encode(model: Any, pixel_values: torch.Tensor, size: tuple[int, int] | None = None,
                 **fixed: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The vision tower (window attention, 2-D rotary) and merger on one image of the grid
    fixed at export (``image_grid_thw`` sets the positions in Python; ``fixed``: the window
    partition computed for that grid before the trace), and each row's place in the grid
    (for the decoder's 3-D rotary positions)."""
    rows, columns = _qwen_grid_of(model, size)
    grid = torch.tensor([[1, rows, columns]])
    features = pooled(model.get_image_features(pixel_values, image_grid_thw=grid, return_dict=True, **fixed))
    return features, qwen_grid_positions(model, size)


def _qwen_windows(model: Any, size: tuple[int, int] | None) -> dict[str, torch.Tensor]:
    """The window partition of the image grid of ``size`` (``window_index``,
    ``cu_window_seqlens``), as transformers' ``get_vision_window_index`` computes it; the
    tower takes it precomputed (empty where the library has no such function)."""
    try:
        from transformers.vision_utils import get_vision_window_index
    except ImportError:
        return {}
    visual = model.model.visual
    grid = torch.tensor([[1, *_qwen_grid_of(model, size)]])
    with torch.no_grad():
        index, bounds = get_vision_window_index(grid, spatial_merge_size=int(visual.spatial_merge_size),
                                                window_size=int(visual.window_size), patch_size=int(visual.patch_size))
    return {"window_index": index, "cu_window_seqlens": bounds}


QWEN2_5_VL = Family("qwen2_5_vl", "image", "image_token_id", ("pixel_values",), _qwen_example, _qwen_encode,
                    fixed="one image of the artifact's image_grid_thw [1, H, W] (default: two attention "
                          "windows a side), pixel_values [H * W, C * T * P * P]: the windows, 2-D positions and "
                          "merge order are computed from the grid in Python, one artifact per size",
                    grid=_qwen_merged_grid, default_size=_qwen_size, check_size=_qwen_check,
                    fixed_inputs=_qwen_windows, forward_inputs=_qwen_inputs)

QWEN2_VL = attrs.evolve(
    QWEN2_5_VL, name="qwen2_vl", fixed_inputs=None,
    fixed="one image of the artifact's image_grid_thw [1, H, W] (default: 224 x 224 pixels, 16 x 16 patches "
          "of 14 px; pass image_sizes for others), pixel_values "
          "[H * W, C * T * P * P]: the 2-D positions and merge order are computed from the grid in Python, one "
          "artifact per size")
"""Qwen2-VL: Qwen2.5-VL's encoder without attention windows (every patch attends every
other), the same 3-D rotary positions in the decoder."""


def _qwen3_vl_encode(model: Any, pixel_values: torch.Tensor, size: tuple[int, int] | None = None
                     ) -> tuple[torch.Tensor, ...]:
    """The tower and merger (the embeddings), the DeepStack mergers' features of the
    layers ``deepstack_visual_indexes`` names, at the grid fixed at export, and each
    row's place in the grid."""
    rows, columns = _qwen_grid_of(model, size)
    out = model.get_image_features(pixel_values, image_grid_thw=torch.tensor([[1, rows, columns]]), return_dict=True)
    deep = [torch.cat(list(f), dim=0) if isinstance(f, (list, tuple)) else f for f in out.deepstack_features]
    return (pooled(out), *deep, qwen_grid_positions(model, size))


def _qwen3_vl_streams(model: torch.nn.Module) -> int:
    vision = config_of(model).vision_config
    return len(vision.deepstack_visual_indexes)


QWEN3_VL = Family("qwen3_vl", "image", "image_token_id", ("pixel_values",), _qwen_example, _qwen3_vl_encode,
                  fixed="one image of the artifact's image_grid_thw [1, H, W] (default: the grid of the "
                        "learned position embeddings, interpolated to the grid in Python), pixel_values "
                        "[H * W, C * T * P * P], one artifact per size", grid=_qwen_merged_grid,
                  deepstack=_qwen3_vl_streams, default_size=_qwen_size, check_size=_qwen_check,
                  forward_inputs=_qwen_inputs)


__all__ = ["QWEN2_5_VL", "QWEN2_VL", "QWEN3_VL", "qwen_grid_positions", "qwen_patch_grid"]
