"""Tensor creation and dtype conversions, checked in tract and in the Khronos interpreter."""

import pytest
import torch

import t2n
from t2n.testing import Lambda, check_dynamic, check_export

torch.manual_seed(0)  # the cases below draw their inputs at import


def r(*shape):
    return torch.randn(*shape)


CASES = {
    "arange": (lambda x: (
        torch.arange(5), torch.arange(1, 10, 3), torch.arange(0.5, 3.0, 0.25), torch.arange(10, 0, -3),
        torch.arange(5, dtype=torch.float32), torch.arange(0, 1, 0.1), torch.arange(-1.5, 2),
        torch.arange(x.size(1)), torch.arange(1, x.size(1), 2), torch.arange(x.size(-1)) * x,
        torch.arange(x.size(1), dtype=torch.float32), torch.arange(0.5, 3.5, 1.5, dtype=torch.long),
    ), (r(2, 5),)),
    "filled": (lambda x: (
        torch.zeros(2, 3), torch.ones(3, dtype=torch.int64), torch.full((2, 3), 1.5), torch.full((2,), 7),
        torch.full((2, 2), 2.5, dtype=torch.float16).float(), torch.zeros(x.size(0), 3), torch.ones(x.shape),
        torch.zeros(()), torch.zeros_like(torch.empty(2, 3)), torch.ones_like(torch.empty_like(x)),
        torch.ones(1, 2, dtype=torch.bool), torch.zeros(x.size(0), 600, 600)[:, :2, :3], torch.full((600, 600), 2.0)[:3] + 1,
    ), (r(2, 5),)),
    "filled_like": (lambda x: (
        torch.zeros_like(x), torch.ones_like(x, dtype=torch.int64), torch.full_like(x, 7),
        torch.full_like(x, 2.5, dtype=torch.float16).float(), torch.full_like(x, x[0, 0]),
        x.new_zeros((2, 3)), x.new_ones(2), x.new_full((2,), 4), x.new_full((1, x.size(1)), -1.0),
        x.long().new_ones(3), torch.zeros_like(x.new_empty((2, 3))), x.new_ones(x.shape[1:]) * x,
    ), (r(2, 5),)),
    "eye": (lambda x: (
        torch.eye(3), torch.eye(3, 4), torch.eye(4, 2, dtype=torch.int64), torch.eye(x.size(1)) @ x.mT,
        torch.eye(x.size(0), x.size(1), dtype=torch.bool),
    ), (r(2, 5),)),
    "linspace_logspace": (lambda x: (
        torch.linspace(0, 1, 5), torch.linspace(-2, 3, 7), torch.linspace(0, 10, 5, dtype=torch.int64),
        torch.linspace(3, 3, 1), torch.linspace(1, -1, 4, dtype=torch.float16).float(),
        torch.logspace(0, 2, 5), torch.logspace(0, 1, 4, base=2), torch.logspace(-1, 1, 3, dtype=torch.float64),
        torch.linspace(x[0, 0], x[1, 1], 6), torch.logspace(x[0, 1], x[1, 0], 4, base=2.0),
        torch.linspace(x[0, 0], 2.0, 1),
    ), (r(2, 5),)),
    "constants": (lambda x: (
        torch.scalar_tensor(3), torch.scalar_tensor(1.5, dtype=torch.float16).float(), torch.tensor([1, 2]),
        torch.tensor([[True, False]]), x + torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0]),
        torch.tensor(x.shape[1]), torch.tensor(x.shape), torch.tensor(2.5) * x,
    ), (r(2, 5),)),
}

KHRONOS_REFUSES: dict[str, str] = {}


@pytest.mark.parametrize("name", sorted(CASES))
def test_creation(name):
    fn, args = CASES[name]
    check_export(Lambda(fn), args, khronos_refuses=KHRONOS_REFUSES.get(name, False))


def casts(x, i, b):
    return (
        x.to(torch.int32), x.long(), x.int(), x.bool(), (x.abs() * 3).byte(), x.to(i), x.type_as(i),
        i.float(), i.to(torch.float64), i.bool(), b.float(), b.long(), b.to(x), i.to(torch.int32),
        x.to("cpu", torch.float64), x.to(dtype=torch.float32, copy=True), (x * 100).half(), x.double(),
        i.half(), b.half(), x.half().float(), x.half().long(), i.to(torch.uint8), i.byte().bool(),
    )


def test_casts():
    x = torch.randn(2, 5) * 7  # negative and fractional values: casts truncate toward zero
    x[0, 0], x[0, 1] = 0.0, -0.5
    i = torch.tensor([[0, 1, -3, 200, 7], [5, 0, 0, 2, -1]])
    b = torch.tensor([[True, False, True, True, False], [False] * 5])
    check_export(Lambda(casts), (x, i, b), targets=("tract",))
    # Standard NNEF has scalar, integer and logical tensors only: casts within a family
    # are copies, between families comparisons, selects or cast<…>.
    check_export(Lambda(lambda x, i, b: (x.long(), x.bool(), i.float(), i.bool(), b.float(), b.long(), x.to(i))),
                 (x, i, b), targets=("khronos",))


class SizeDerived(torch.nn.Module):
    """Creation from sizes: the sizes stay graph values and follow the symbol T."""

    def forward(self, x):
        n = x.size(1)
        return (
            torch.arange(n), torch.arange(n, dtype=torch.float32) * x, torch.arange(1, n, 2) * 1.0,
            torch.zeros(n, 2), torch.ones_like(x), torch.full_like(x, 3.0), x.new_zeros(x.shape),
            torch.eye(n) @ x.mT, torch.tensor(x.shape[1]),
            torch.stack([torch.tensor(x.shape[0]), torch.tensor(x.shape[1])]),
            torch.eye(2, n, dtype=torch.int64), torch.full((n,), 7),
        )


def test_sizes_follow_dynamic_axes_and_outputs_are_real_dtypes():
    # torch.tensor(x.shape[1]) is an i64 output computed from a size: tract hands it back
    # (a TDim output would not be), at the traced size and at others.
    check_dynamic(SizeDerived(), lambda T: (torch.randn(2, T),), {"input_0": {1: "T"}},
                  sizes=[{"T": 5}, {"T": 1}, {"T": 8}])


def test_range_from_data_runs_with_a_run_time_length():
    """The length comes from tensor data: tract's range takes it at run time (more
    forms in test_data_sized_creation.py)."""
    model = Lambda(lambda x, n: x[: 2] * torch.arange(n[0]).sum())
    art = t2n.compile(model, (torch.randn(3), torch.tensor([4])))
    for n in (4, 7, 1):
        args = (torch.randn(3), torch.tensor([n]))
        assert art.check(inputs=[a.numpy() for a in args], expected=[model(*args).numpy()]).ok
