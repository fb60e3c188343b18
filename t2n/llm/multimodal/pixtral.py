"""Mistral 3's image encoder (Pixtral's tower and the projector) for one image of any
size, every size computed in the graph from the pixel values' ``[1, 3, H, W]``:

- the patch grid is the patch convolution's output, ``H / patch`` by ``W / patch``;
- Pixtral's 2-D rotary angles come from each patch's row and column (``arange`` of the
  grid's sides), computed by the model's own rotary module;
- attention runs over all patches of the one image (transformers' block mask is all
  zeros for a single image, so none is needed);
- the patch merger (``unfold`` by ``spatial_merge_size``, then a linear layer) is the same
  linear map written as a convolution of stride ``spatial_merge_size`` whose kernel is the
  merging layer's weight: its output grid is the merged grid, with no reshape that splits
  a symbolic side (which the engine could not prove exact).

The model's ``get_image_features`` builds the grid in Python from ``image_sizes``, so
tracing it fixes one size; this computes the same features for every size."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    import transformers


def pixtral_image_features(model: transformers.PreTrainedModel, pixel_values: torch.Tensor) -> torch.Tensor:
    """``[rows * columns, hidden]``: the model's image features of one image
    (``pixel_values`` ``[1, 3, H, W]``, sides multiples of ``patch_size``), row-major over
    the merged grid, as ``get_image_features(pixel_values, image_sizes=[(H, W)])``."""
    inner = model.model
    tower = inner.vision_tower
    projector = inner.multi_modal_projector
    patches = tower.patch_conv(pixel_values.to(tower.patch_conv.weight.dtype))  # [1, D, h, w]
    rows, columns = patches.shape[2], patches.shape[3]
    hidden = tower.ln_pre(patches.flatten(2).transpose(1, 2))  # [1, h * w, D], row-major
    row = torch.arange(rows, device=patches.device).unsqueeze(1).expand(rows, columns).reshape(-1)
    column = torch.arange(columns, device=patches.device).unsqueeze(0).expand(rows, columns).reshape(-1)
    rotary = tower.patch_positional_embedding(hidden, torch.stack([row, column], dim=-1))
    states = [hidden]  # the tower's hidden states: its input, then each layer's output
    for layer in tower.transformer.layers:
        hidden = layer(hidden, None, position_embeddings=rotary)
        states.append(hidden)
    chosen = model.config.vision_feature_layer
    features = (states[chosen] if isinstance(chosen, int) else torch.cat([states[i] for i in chosen], dim=-1))
    features = projector.norm(features.squeeze(0))
    merger = projector.patch_merger
    merge = int(merger.spatial_merge_size)
    width = features.shape[-1]
    grid = features.reshape(rows, columns, width).permute(2, 0, 1).unsqueeze(0)  # [1, D, h, w]
    kernel = merger.merging_layer.weight.reshape(-1, width, merge, merge)  # unfold's order: channel, row, column
    merged = torch.nn.functional.conv2d(grid, kernel, stride=merge)  # [1, D, h / m, w / m]
    merged = merged.flatten(2).transpose(1, 2).squeeze(0)
    out: torch.Tensor = projector.linear_2(projector.act(projector.linear_1(merged)))
    return out
