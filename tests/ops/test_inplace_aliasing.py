"""Aliasing corner cases of in-place writes: multi-output views (chunk/split/unbind),
reshape-likes that copy a non-contiguous input, ``to`` returning its input, chained
in-place ops, and writes into a model input (non-idempotent, so a dropped write or a
stale example input shows)."""

from __future__ import annotations

import pytest
import torch

from t2n.testing import Lambda, check_export


def chunk_piece(x):
    x = x.clone()
    a, _ = x.chunk(2)
    a.fill_(0)
    return x


def split_piece(x):
    x = x.clone()
    _, b = x.split([1, 3])
    b.mul_(2)
    return x


def unbind_piece(x):
    x = x.clone()
    rows = x.unbind(0)
    rows[1].zero_()
    return x


def reshape_copies(x):
    y = x.t().reshape(-1)  # non-contiguous input: a copy, so x must not change
    y[0] = 100.0
    return x + 0, y


def contiguous_copies(x):
    y = x.t().contiguous()
    y[0] = 100.0
    return x + 0, y


def reshape_views(x):
    x = x.clone()
    x.reshape(2, 2, 6)[1, 0] = 7.0  # contiguous input: a view, so x changes
    return x


def to_same_dtype_aliases(x):
    x = x.clone()
    v = x[:, :2]
    y = x.to(torch.float32)  # PyTorch returns x itself, so v sees the write
    y.add_(1)
    return v * 1


def chained_inplace(x):
    x = x.clone()
    y = x[:, 1:3].mul_(2)
    y.add_(1)
    return x


def add_into_input(x):
    x[:, 1] += 3.0  # not idempotent: a dropped write or mutated example input shows
    return x * 2


X = torch.randn(4, 6)


@pytest.mark.parametrize("fn", [chunk_piece, split_piece, unbind_piece, reshape_copies,
                                contiguous_copies, reshape_views, to_same_dtype_aliases,
                                chained_inplace, add_into_input], ids=lambda f: f.__name__)
def test_aliasing_both_targets(fn):
    check_export(Lambda(fn).eval(), (X.clone(),))
