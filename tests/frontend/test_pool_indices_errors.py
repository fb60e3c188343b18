"""Bad inputs around max-pool indices and max_unpool: each refused with a typed error
that names the op and says what to do; and the trace's handling of ``max_unpool``
leaves PyTorch as it was."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from t2n import KhronosNNEF, compile
from t2n.errors import DynamicAxesError, NotExpressibleError, TraceError
from t2n.testing import Lambda

FRONTENDS = ["jit", "export"]


class SegNetLike(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.Conv2d(3, 4, 3, padding=1)
        self.pool = nn.MaxPool2d(2, return_indices=True)
        self.unpool = nn.MaxUnpool2d(2)
        self.dec = nn.Conv2d(4, 2, 3, padding=1)

    def forward(self, x):
        y, i = self.pool(torch.relu(self.enc(x)))
        return self.dec(self.unpool(y, i))


@pytest.mark.parametrize("frontend", FRONTENDS)
def test_khronos_refuses_an_unpool_by_name(frontend):
    with pytest.raises(NotExpressibleError) as info:
        compile(SegNetLike().eval(), (torch.randn(1, 3, 8, 8),), KhronosNNEF(), frontend=frontend)
    text = str(info.value)
    assert "aten::max_unpool2d" in text and "unpool_scatter" in text
    assert "nothing was written" in text and "TractNNEF" in text


@pytest.mark.parametrize("frontend", FRONTENDS)
def test_khronos_refuses_read_pool_indices_by_name(frontend):
    pool = nn.MaxPool2d(2, return_indices=True)
    with pytest.raises(NotExpressibleError) as info:
        compile(Lambda(lambda x: pool(x)).eval(), (torch.randn(1, 2, 4, 4),), KhronosNNEF(), frontend=frontend)
    text = str(info.value)
    assert "aten::max_pool2d_with_indices" in text and "return_indices=True" in text
    assert "argmax_pool" in text and "TractNNEF" in text


def test_adaptive_indices_bake_a_dynamic_size_and_say_so():
    """Windows of adaptive pooling depend on the size: over a dynamic axis the indices
    (like the values) are reported; a global pool's indices stay dynamic."""
    pool = nn.AdaptiveMaxPool1d(3, return_indices=True)
    with pytest.raises(DynamicAxesError, match="adaptive max pool indices"):
        compile(Lambda(lambda x: pool(x)).eval(), (torch.randn(1, 2, 10),), dynamic_axes={"x": {2: "L"}},
                input_names=["x"], strict_dynamic_axes=True)
    whole = nn.AdaptiveMaxPool1d(1, return_indices=True)
    art = compile(Lambda(lambda x: whole(x)).eval(), (torch.randn(1, 2, 9),), dynamic_axes={"x": {2: "L"}},
                  input_names=["x"], strict_dynamic_axes=True)
    x = torch.randn(1, 2, 13)
    values, indices = whole(x)
    art.check(inputs=[x.numpy()], expected=[values.numpy(), indices.numpy()])


@pytest.mark.parametrize("frontend", FRONTENDS)
def test_unpool_to_an_impossible_output_size_is_a_trace_error(frontend):
    pool, unpool = nn.MaxPool2d(2, return_indices=True), nn.MaxUnpool2d(2)

    def roundtrip(x):
        values, indices = pool(x)
        return unpool(values, indices, output_size=(20, 20))

    with pytest.raises(TraceError) as info:
        compile(Lambda(roundtrip).eval(), (torch.randn(1, 2, 8, 8),), frontend=frontend)
    assert "output_size" in str(info.value) and "between 6 and 10" in str(info.value)


def test_unpool_indices_outside_the_plane_are_a_trace_error():
    """PyTorch checks the example's indices; the artifact drops such an index at run time."""
    with pytest.raises(TraceError, match="invalid max index"):
        compile(Lambda(lambda v, i: F.max_unpool2d(v, i, 2)).eval(),
                (torch.randn(1, 1, 2, 2), torch.full((1, 1, 2, 2), 99)))


def test_the_trace_leaves_pytorch_as_it_was():
    """Only the trace sees the replacement: afterwards PyTorch's own max_unpool runs
    (and refuses to be traced without t2n) as before."""
    compile(SegNetLike().eval(), (torch.randn(1, 3, 8, 8),))
    assert F.max_unpool2d.__module__ == "torch.nn.functional"
    x, i = F.max_pool2d(torch.randn(1, 1, 4, 4), 2, return_indices=True)
    assert np.array_equal(F.max_unpool2d(x, i, 2).numpy(), nn.MaxUnpool2d(2)(x, i).numpy())
    with pytest.raises(TypeError, match="cond must be a bool"):
        torch.jit.trace(SegNetLike().eval(), (torch.randn(1, 3, 8, 8),))
