"""untie-product-weights: a matrix product whose big weight other ops read too (an output
projection tied to the embedding) reads a transposed copy of its own, which tract packs
once at load; a weight shared by several products, a small one, or the option off, is
left as it is. Numbers checked in tract."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import t2n
from t2n.backends.tract.passes.product_weights import TRACT_FOLD_BUDGET

WIDTH = 256
BIG_VOCAB = TRACT_FOLD_BUDGET // (WIDTH * 4) + 8  # f32 rows: just over tract's budget


class Tied(nn.Module):
    """An embedding whose matrix is also the output projection's weight."""

    def __init__(self, vocab: int, head_first: bool = False) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, WIDTH)
        self.mix = nn.Linear(WIDTH, WIDTH)
        self.head_first = head_first

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.mix(self.embed(ids)))
        if self.head_first:  # the weight as the product's first operand: [V, W] @ [W, S]
            return torch.matmul(self.embed.weight, h[0].t())
        return h @ self.embed.weight.t()


class SharedByProducts(nn.Module):
    """One big weight read by two products (and a gather)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(BIG_VOCAB, WIDTH)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.embed(ids)
        logits = h @ self.embed.weight.t()
        return logits + torch.tanh(h) @ self.embed.weight.t()


def ids(vocab: int) -> torch.Tensor:
    return torch.randint(0, vocab, (1, 5))


def weights(artifact: t2n.Artifact) -> list[str]:
    return [line.split("=")[0].strip() for line in artifact.graph_nnef.splitlines() if "variable<" in line]


@pytest.mark.parametrize("head_first", [False, True], ids=["head x @ W.T", "W @ x"])
def test_a_tied_head_reads_a_transposed_copy(head_first):
    model = Tied(BIG_VOCAB, head_first).eval()
    artifact = t2n.compile(model, (ids(BIG_VOCAB),), t2n.TractNNEF.latest())
    copied = [op for op in artifact.ir.ops() if op.kind == "variable" and op.attrs["label"].endswith(".transposed")]
    assert len(copied) == 1
    assert copied[0].output.type.shape == (WIDTH, BIG_VOCAB)
    (product,) = [op for op in artifact.ir.ops() if op.kind == "matmul" and copied[0].output in op.inputs]
    # W @ x: the copy is W.T read transposed; x @ W.t(): the copy is the transpose's work
    assert product.attrs["transpose_a" if head_first else "transpose_b"] is head_first
    assert not any(op.kind == "transpose" and op.inputs[0].producer.kind == "variable" for op in artifact.ir.ops())
    assert artifact.check().ok


def test_the_copy_behind_a_cast_keeps_the_cast():
    """f16 weights whose products accumulate in f32 read the copy through its cast."""
    model = Tied(BIG_VOCAB * 2).half().eval()
    target = t2n.TractNNEF.latest(force_linear_accumulation_in_f32=True)
    artifact = t2n.compile(model, (ids(BIG_VOCAB * 2),), target)
    copied = [op for op in artifact.ir.ops() if op.kind == "variable" and op.attrs["label"].endswith(".transposed")]
    assert len(copied) == 1
    (reader,) = [user for user, _ in copied[0].output.uses]
    assert reader.kind == "cast"
    assert artifact.check("very").ok  # PyTorch computes in f16, the artifact in f32


@pytest.mark.parametrize("case", ["option off", "small weight", "several products"])
def test_left_as_it_is(case):
    vocab = 64 if case == "small weight" else BIG_VOCAB
    model = (SharedByProducts() if case == "several products" else Tied(vocab)).eval()
    target = t2n.TractNNEF.latest(copy_shared_product_weights=case != "option off")
    artifact = t2n.compile(model, (ids(vocab),), target)
    assert not any(name.endswith("_transposed") for name in weights(artifact))
    assert artifact.check().ok


def test_the_copy_is_on_disk_once(tmp_path):
    """The artifact holds the weight and one transposed copy of it: the price of the speed."""
    model = Tied(BIG_VOCAB).eval()
    sizes = {}
    for copy in (True, False):
        out = tmp_path / f"copy_{copy}"
        t2n.compile(model, (ids(BIG_VOCAB),), t2n.TractNNEF.latest(copy_shared_product_weights=copy)).save(out)
        sizes[copy] = sum(f.stat().st_size for f in out.rglob("*.dat"))
    matrix = BIG_VOCAB * WIDTH * 4
    assert sizes[True] - sizes[False] == pytest.approx(matrix, rel=0.01)
