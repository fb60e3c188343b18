"""Every function of torch.nn.functional with an inference meaning, exported and run
in tract and in the Khronos interpreter (or refused for Khronos, by name, where
standard NNEF has no form); and every public function classified in
``tools.functional_coverage``, so the table in docs/operators.md stays true."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from t2n.testing import check_export
from tools import functional_coverage as coverage

r = torch.randn


def img() -> torch.Tensor:
    return r(1, 4, 8, 8)


SAMPLES: dict[str, tuple[Callable[..., Any], Callable[[], tuple[Any, ...]]]] = {
 "adaptive_avg_pool1d": (lambda x: F.adaptive_avg_pool1d(x, 3), lambda: (r(1,4,9),)),
 "adaptive_avg_pool2d": (lambda x: F.adaptive_avg_pool2d(x, (2,4)), lambda: (img(),)),
 "adaptive_avg_pool3d": (lambda x: F.adaptive_avg_pool3d(x, 2), lambda: (r(1,2,4,4,4),)),
 "adaptive_max_pool1d": (lambda x: F.adaptive_max_pool1d(x, 3), lambda: (r(1,4,9),)),
 "adaptive_max_pool2d": (lambda x: F.adaptive_max_pool2d(x, 2), lambda: (img(),)),
 "adaptive_max_pool3d": (lambda x: F.adaptive_max_pool3d(x, 2), lambda: (r(1,2,4,4,4),)),
 "affine_grid_3d_aligned": (lambda t: F.affine_grid(t, [1, 2, 3, 4, 5], align_corners=True), lambda: (r(1, 3, 4),)),
 "affine_grid": (lambda t: F.affine_grid(t, [2,3,5,7], align_corners=False), lambda: (r(2,2,3),)),
 "alpha_dropout": (lambda x: F.alpha_dropout(x, 0.2, training=False), lambda: (img(),)),
 "avg_pool1d": (lambda x: F.avg_pool1d(x, 3, 2), lambda: (r(1,4,9),)),
 "avg_pool2d": (lambda x: F.avg_pool2d(x, 2), lambda: (img(),)),
 "avg_pool3d": (lambda x: F.avg_pool3d(x, 2), lambda: (r(1,2,4,4,4),)),
 "batch_norm": (lambda x: F.batch_norm(x, torch.zeros(4), torch.ones(4), torch.ones(4), torch.zeros(4)), lambda: (img(),)),
 "bilinear": (lambda a,b: F.bilinear(a, b, torch.ones(3,4,5)*0.1), lambda: (r(2,4), r(2,5))),
 "celu": (lambda x: F.celu(x, 0.7), lambda: (img(),)),
 "channel_shuffle": (lambda x: F.channel_shuffle(x, 2), lambda: (img(),)),
 "native_channel_shuffle": (lambda x: F.native_channel_shuffle(x, 2), lambda: (img(),)),
 "conv1d": (lambda x: F.conv1d(x, torch.ones(3,4,3)), lambda: (r(1,4,9),)),
 "conv2d": (lambda x: F.conv2d(x, torch.ones(3,4,3,3)), lambda: (img(),)),
 "conv3d": (lambda x: F.conv3d(x, torch.ones(3,2,3,3,3)), lambda: (r(1,2,4,4,4),)),
 "conv_tbc": (lambda x: F.conv_tbc(x, torch.ones(3,4,5)*0.1, torch.zeros(5)), lambda: (r(9,2,4),)),
 "conv_transpose1d": (lambda x: F.conv_transpose1d(x, torch.ones(4,3,3)), lambda: (r(1,4,9),)),
 "conv_transpose2d": (lambda x: F.conv_transpose2d(x, torch.ones(4,3,3,3)), lambda: (img(),)),
 "conv_transpose3d": (lambda x: F.conv_transpose3d(x, torch.ones(2,3,3,3,3)), lambda: (r(1,2,4,4,4),)),
 "cosine_similarity": (lambda a,b: F.cosine_similarity(a,b), lambda: (r(3,8), r(3,8))),
 "dropout": (lambda x: F.dropout(x, 0.5, training=False), lambda: (img(),)),
 "dropout1d": (lambda x: F.dropout1d(x, 0.5, training=False), lambda: (r(1,4,9),)),
 "dropout2d": (lambda x: F.dropout2d(x, 0.5, training=False), lambda: (img(),)),
 "dropout3d": (lambda x: F.dropout3d(x, 0.5, training=False), lambda: (r(1,2,4,4,4),)),
 "feature_alpha_dropout": (lambda x: F.feature_alpha_dropout(x, 0.5, training=False), lambda: (img(),)),
 "elu": (lambda x: F.elu(x), lambda: (img(),)),
 "embedding": (lambda i: F.embedding(i, torch.arange(40.).reshape(10,4)), lambda: (torch.tensor([[1,3,9]]),)),
 "embedding_bag": (lambda i: F.embedding_bag(i, torch.arange(40.).reshape(10,4), torch.tensor([0,2])), lambda: (torch.tensor([1,3,9,2]),)),
 "fold": (lambda x: F.fold(x, (4,5), 2), lambda: (r(1,12,12),)),
 "unfold": (lambda x: F.unfold(x, 3, padding=1), lambda: (img(),)),
 "gelu": (lambda x: F.gelu(x), lambda: (img(),)),
 "glu": (lambda x: F.glu(x, 1), lambda: (img(),)),
 "grid_sample": (lambda x, g: F.grid_sample(x, g, align_corners=False), lambda: (img(), torch.rand(1,5,6,2)*2-1)),
 "group_norm": (lambda x: F.group_norm(x, 2), lambda: (img(),)),
 "hardshrink": (lambda x: F.hardshrink(x), lambda: (img(),)),
 "hardsigmoid": (lambda x: F.hardsigmoid(x), lambda: (img(),)),
 "hardswish": (lambda x: F.hardswish(x), lambda: (img(),)),
 "hardtanh": (lambda x: F.hardtanh(x, -0.5, 0.5), lambda: (img(),)),
 "instance_norm": (lambda x: F.instance_norm(x), lambda: (img(),)),
 "interpolate": (lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"), lambda: (img(),)),
 "upsample": (lambda x: F.upsample(x, scale_factor=2), lambda: (img(),)),
 "upsample_bilinear": (lambda x: F.upsample_bilinear(x, scale_factor=2), lambda: (img(),)),
 "upsample_nearest": (lambda x: F.upsample_nearest(x, scale_factor=2), lambda: (img(),)),
 "layer_norm": (lambda x: F.layer_norm(x, (8,)), lambda: (img(),)),
 "leaky_relu": (lambda x: F.leaky_relu(x, 0.1), lambda: (img(),)),
 "linear": (lambda x: F.linear(x, torch.ones(3,8)), lambda: (img(),)),
 "local_response_norm": (lambda x: F.local_response_norm(x, 3), lambda: (img(),)),
 "log_softmax": (lambda x: F.log_softmax(x, 1), lambda: (img(),)),
 "logsigmoid": (lambda x: F.logsigmoid(x), lambda: (img(),)),
 "lp_pool1d": (lambda x: F.lp_pool1d(x, 2, 3), lambda: (r(1,4,9),)),
 "lp_pool2d": (lambda x: F.lp_pool2d(x, 2, 2), lambda: (img(),)),
 "lp_pool3d": (lambda x: F.lp_pool3d(x, 2, 2), lambda: (r(1,2,4,4,4),)),
 "max_pool1d": (lambda x: F.max_pool1d(x, 3), lambda: (r(1,4,9),)),
 "max_pool2d": (lambda x: F.max_pool2d(x, 2), lambda: (img(),)),
 "max_pool3d": (lambda x: F.max_pool3d(x, 2), lambda: (r(1,2,4,4,4),)),
 "max_pool1d_with_indices": (lambda x: F.max_pool1d_with_indices(x, 3, 2, 1), lambda: (r(1,4,9),)),
 "max_pool2d_with_indices": (lambda x: F.max_pool2d_with_indices(x, 2), lambda: (img(),)),
 "max_pool3d_with_indices": (lambda x: F.max_pool3d_with_indices(x, 2), lambda: (r(1,2,4,4,4),)),
 "adaptive_max_pool1d_with_indices": (lambda x: F.adaptive_max_pool1d_with_indices(x, 4), lambda: (r(1,4,9),)),
 "adaptive_max_pool2d_with_indices": (lambda x: F.adaptive_max_pool2d_with_indices(x, 2), lambda: (img(),)),
 "adaptive_max_pool3d_with_indices": (lambda x: F.adaptive_max_pool3d_with_indices(x, 2), lambda: (r(1,2,4,4,4),)),
 "max_unpool1d": (lambda x: F.max_unpool1d(*F.max_pool1d(x, 2, return_indices=True), 2), lambda: (r(1,4,9),)),
 "max_unpool2d": (lambda x: F.max_unpool2d(*F.max_pool2d(x, 2, return_indices=True), 2), lambda: (img(),)),
 "max_unpool3d": (lambda x: F.max_unpool3d(*F.max_pool3d(x, 2, return_indices=True), 2), lambda: (r(1,2,4,4,4),)),
 "mish": (lambda x: F.mish(x), lambda: (img(),)),
 "normalize": (lambda x: F.normalize(x, dim=1), lambda: (img(),)),
 "one_hot": (lambda i: F.one_hot(i, 5), lambda: (torch.tensor([1,4,0]),)),
 "pad": (lambda x: F.pad(x, (1,2,0,1), mode="reflect"), lambda: (img(),)),
 "pairwise_distance": (lambda a,b: F.pairwise_distance(a,b), lambda: (r(3,8), r(3,8))),
 "pdist": (lambda a: F.pdist(a), lambda: (r(4,8),)),
 "pixel_shuffle": (lambda x: F.pixel_shuffle(x, 2), lambda: (img(),)),
 "pixel_unshuffle": (lambda x: F.pixel_unshuffle(x, 2), lambda: (img(),)),
 "prelu": (lambda x: F.prelu(x, torch.full((4,), 0.2)), lambda: (img(),)),
 "relu": (lambda x: F.relu(x), lambda: (img(),)),
 "relu6": (lambda x: F.relu6(x), lambda: (img(),)),
 "rms_norm": (lambda x: F.rms_norm(x, (8,)), lambda: (img(),)),
 "rrelu": (lambda x: F.rrelu(x, training=False), lambda: (img(),)),
 "scaled_dot_product_attention": (lambda q,k,v: F.scaled_dot_product_attention(q,k,v, is_causal=True), lambda: (r(1,2,5,8), r(1,2,5,8), r(1,2,5,8))),
 "selu": (lambda x: F.selu(x), lambda: (img(),)),
 "sigmoid": (lambda x: F.sigmoid(x), lambda: (img(),)),
 "silu": (lambda x: F.silu(x), lambda: (img(),)),
 "softmax": (lambda x: F.softmax(x, 1), lambda: (img(),)),
 "softmin": (lambda x: F.softmin(x, 1), lambda: (img(),)),
 "softplus": (lambda x: F.softplus(x, 2.0, 10.0), lambda: (img(),)),
 "softshrink": (lambda x: F.softshrink(x), lambda: (img(),)),
 "softsign": (lambda x: F.softsign(x), lambda: (img(),)),
 "tanh": (lambda x: F.tanh(x), lambda: (img(),)),
 "tanhshrink": (lambda x: F.tanhshrink(x), lambda: (img(),)),
 "threshold": (lambda x: F.threshold(x, 0.1, 20.0), lambda: (img(),)),
 "multi_head_attention_forward": (lambda q: F.multi_head_attention_forward(q, q, q, 8, 2, torch.ones(24,8)*0.1, torch.zeros(24), None, None, False, 0.0, torch.ones(8,8)*0.1, torch.zeros(8), training=False, need_weights=False)[0], lambda: (r(5,1,8),)),
}


class Call(torch.nn.Module):
    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: Any) -> Any:
        return self.fn(*args)


def _function(case: str) -> str:
    return case.removesuffix("_3d_aligned")


@pytest.mark.parametrize("case", sorted(SAMPLES))
def test_functional_runs_in_both_engines(case):
    fn, args = SAMPLES[case]
    torch.manual_seed(0)
    refused = coverage.KHRONOS_REFUSED.get(_function(case))
    check_export(Call(fn), args(), khronos_refuses=bool(refused))


def test_every_exported_function_has_a_case_and_every_function_is_classified():
    covered = {_function(c) for c in SAMPLES}
    assert covered == set(coverage.exported())
    names = {coverage.base_name(n) for n in coverage.public_functions()}
    assert {"affine_grid", "conv_tbc", "scaled_dot_product_attention"} <= names
    rows = {row[0]: row for row in coverage.rows()}
    assert set(rows) == names
    assert all(note for name, t, k, note in rows.values() if "✘" in (t, k) or t == "—")


@pytest.mark.parametrize("name", sorted(coverage.REFUSED))
def test_the_table_names_why_a_function_is_refused(name):
    assert coverage.REFUSED[name] in coverage.section()

