"""nn.EmbeddingBag with bags given at run time, in tract and in the Khronos interpreter."""

import pytest
import torch
from torch import nn

from t2n.testing import Call, check_dynamic, check_export

IDX = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 0, 0])
OFFSETS = torch.tensor([0, 4, 4, 7])  # bag 1 is empty

CASES = {
    "sum": lambda: (nn.EmbeddingBag(10, 3, mode="sum"), (IDX, OFFSETS)),
    "mean": lambda: (nn.EmbeddingBag(10, 3, mode="mean"), (IDX, OFFSETS)),
    "max": lambda: (nn.EmbeddingBag(10, 3, mode="max"), (IDX, OFFSETS)),
    "mean_padding_idx": lambda: (nn.EmbeddingBag(10, 3, mode="mean", padding_idx=0), (IDX, OFFSETS)),
    "max_padding_idx": lambda: (nn.EmbeddingBag(10, 3, mode="max", padding_idx=4), (IDX, OFFSETS)),
    "sum_per_sample_weights": lambda: (
        Call(nn.EmbeddingBag(10, 3, mode="sum"), lambda m, i, o, w: m(i, o, per_sample_weights=w)),
        (IDX, OFFSETS, torch.rand(10))),
    "sum_include_last_offset": lambda: (nn.EmbeddingBag(10, 3, mode="sum", include_last_offset=True),
                                        (IDX, torch.tensor([0, 3, 3, 10]))),
    "mean_2d_input": lambda: (nn.EmbeddingBag(10, 3, mode="mean"), (IDX.reshape(2, 5),)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_embedding_bag(name):
    model, args = CASES[name]()
    check_export(model, args)


def test_bags_follow_dynamic_sizes():
    def make(N, B):
        offsets = torch.sort(torch.randint(0, N, (B,))).values
        offsets[0] = 0
        return torch.randint(0, 10, (N,)), offsets

    check_dynamic(nn.EmbeddingBag(10, 3, mode="mean"), make, {"input_0": {0: "N"}, "input_1": {0: "B"}},
                  [{"N": 8, "B": 3}, {"N": 1, "B": 1}, {"N": 12, "B": 5}])
