"""``torch.arange(n)``, ``zeros``/``full``/``new_zeros`` and ``eye`` sized by a 0-d tensor
input ``n``: the length comes from tensor data, so tract computes it at run time
(its ``range`` takes a run-time end). Each artifact is run in tract at several values
of ``n`` against PyTorch. A length from data that an op would need as a size known at
load time (a slice bound on that axis) is refused before anything is written.
"""

import numpy as np
import pytest
import torch

import t2n
from t2n.errors import NotExpressibleError, UnsupportedOpsError
from t2n.testing import Lambda

X = torch.randn(4, 3)
LENGTHS = (5, 1, 8, 2)


def _check_at_lengths(fn, *, extra=(X,), lengths=LENGTHS):
    """Compile once with ``n = lengths[0]``, then run tract at every length."""
    model = Lambda(fn).eval()
    art = t2n.compile(model, (*extra, torch.tensor(lengths[0])))
    for n in lengths:
        args = (*extra, torch.tensor(n))
        with torch.no_grad():
            out = model(*args)
        outs = out if isinstance(out, tuple) else (out,)
        report = art.check(inputs=[a.numpy() for a in args], expected=[o.numpy() for o in outs])
        assert report.ok, (n, report)
    return art


CASES = {
    "arange": lambda x, n: torch.arange(n),
    "arange_broadcast": lambda x, n: x[:, :1] + torch.arange(n),
    "arange_start_step": lambda x, n: torch.arange(1, n * 2, 3) * 2,
    "arange_float": lambda x, n: torch.arange(n, dtype=torch.float32) / 2,
    "length_mask": lambda x, n: (torch.arange(n)[None, :] < torch.tensor([[1], [3]])).float(),
    "new_zeros": lambda x, n: x.new_zeros(n) + 1,
    "new_ones_2d": lambda x, n: x.new_ones((n, 3)) * x[:1],
    "new_full": lambda x, n: x.new_full((2, n), 7.5),
    "full": lambda x, n: torch.full((n, 2), 3.0),
    "zeros_computed": lambda x, n: torch.zeros(n * 2 + 1),
    "ones_int": lambda x, n: torch.ones(n, 2, dtype=torch.int64) * 4,
    "zeros_bool": lambda x, n: torch.zeros((2, n), dtype=torch.bool) | (torch.arange(n) > 1),
    "eye": lambda x, n: torch.eye(n),
    "unsqueezed": lambda x, n: torch.arange(n).view(-1, 1) * torch.arange(3),
}


@pytest.mark.parametrize("name", list(CASES))
def test_size_from_a_0d_tensor_input_runs_at_every_length(name):
    _check_at_lengths(CASES[name])


def test_the_length_is_not_declared_as_a_symbol():
    art = _check_at_lengths(lambda x, n: torch.arange(n) * 2)
    assert "tract_core_range" in art.graph_nnef
    assert "tract_symbol" not in art.graph_nnef and "_data_" not in art.graph_nnef


def test_a_reshape_to_one_size_from_data_infers_it():
    _check_at_lengths(lambda x, n: torch.arange(n).float().view(n, 1) * x[0])


def test_a_reshape_to_two_sizes_from_data_is_refused_before_writing(tmp_path):
    """No traced size may stand for a size that changes with the data."""
    model = Lambda(lambda x, n: x.new_zeros(n * n).view(n, n))
    with pytest.raises(UnsupportedOpsError, match=r"aten::view.*several sizes computed from tensor data"):
        t2n.export(model, (X, torch.tensor(5)), tmp_path / "m.nnef.tgz")
    assert list(tmp_path.iterdir()) == []


def test_splitting_a_data_sized_axis_is_refused_before_writing(tmp_path):
    """tract cannot split a length it names at run time (``n * 3`` into ``(n, 3)``)."""
    model = Lambda(lambda x, n: x.new_zeros(n * 3).view(n, 3))
    with pytest.raises(NotExpressibleError, match=r"splits or merges an axis whose length is computed"):
        t2n.export(model, (X, torch.tensor(5)), tmp_path / "m.nnef.tgz")
    assert list(tmp_path.iterdir()) == []


def test_zero_length_gives_an_empty_tensor_as_pytorch():
    art = t2n.compile(Lambda(lambda x, n: torch.arange(n) + 1), (X, torch.tensor(3)))
    report = art.check(inputs=[X.numpy(), np.asarray(0)], expected=[np.zeros(0, dtype=np.int64)])
    assert report.ok
