"""Shape and movement ops, checked in tract and in the Khronos interpreter.

Cases are grouped into multi-output models to keep the engine runs few.
"""

import pytest
import torch
import torch.nn.functional as F

import t2n
from t2n.passes.dynamic_axes import BakedSizeWarning
from t2n.testing import Lambda, check_dynamic, check_export

torch.manual_seed(0)  # the cases below draw their inputs at import


def r(*shape, dtype=torch.float32):
    return torch.randn(*shape).to(dtype)


def ints(*shape):
    return torch.randint(-50, 50, shape)


CASES = {
    "reshape_view_family": (lambda x, y: (
        x.reshape(-1, 4), x.view(2, -1), x.view_as(y), x.reshape_as(y), x.flatten(0, 1),
        x.flatten(-2), x.unflatten(1, (-1, 1)), x.unflatten(-1, (2, 2)),
    ), (r(2, 3, 4), r(4, 6))),
    "permute_family": (lambda x: (
        x.permute(-1, 0, 1), x.transpose(0, -1), x.swapaxes(1, 2), x.mT, x.mH, x.adjoint(),
        x[0].T, x[0].t(), x.movedim(0, -1), torch.moveaxis(x, (0, 1), (2, 0)),
        x.movedim(-1, -1),
    ), (r(2, 3, 4),)),
    "squeeze_unsqueeze": (lambda x: (
        x.squeeze((1, 3)), x.squeeze(-1), x.squeeze(0), x.squeeze(), x.unsqueeze(-1),
        x.unsqueeze(-5), x.unsqueeze(2),
    ), (r(2, 1, 3, 1),)),
    "repeat_tile": (lambda x: (
        x.repeat(2, 1, 3), x.repeat(2, 1), torch.tile(x, (2,)), torch.tile(x, (2, 1, 2)),
        x.expand(3, -1, -1), x[:1].expand_as(x), torch.broadcast_to(x[:, :1], (2, 4)),
    ), (r(2, 3),)),
    "repeat_interleave": (lambda x: (
        x.repeat_interleave(2, dim=1), x.repeat_interleave(3), x.repeat_interleave(2, dim=-2),
        x.repeat_interleave(torch.tensor([1, 0, 2]), dim=1), x.repeat_interleave(torch.tensor(2)),
        torch.repeat_interleave(torch.tensor([2, 1, 3])) * 1.0,
    ), (r(2, 3),)),
    "flip_roll_narrow": (lambda x: (
        x.flip(0, -1), torch.fliplr(x), torch.flipud(x), x.flip(1),
        x.roll(1, 1), x.roll(-2, -1), x.roll((5, 1), (1, 2)), x.roll(4), x.roll(0, 0),
        x.narrow(1, 1, 2), x.narrow(-1, -3, 2), x.narrow(-1, -2, 2), x + torch.arange(4.0).flip(0),
    ), (r(2, 3, 4),)),
    "slicing": (lambda x: (
        x[:, -3:], x[:, :-1], x[..., ::2], x[:, 1:100], x[:, -100:2], x[:, -2], x[-1],
        x[..., 1:-1:2], x[1:, :, 3:], x[:, 2], x[:, :, -1:],
    ), (r(2, 4, 5),)),
    "split_family": (lambda x: (
        *x.unbind(1), *x.unbind(-1), *x.split(3, 1), *x.split([1, 4, 2], -1), *x.chunk(3, 1),
        *x.chunk(4, dim=-2), *x.tensor_split(3, 1), *x.tensor_split([1, 4], 1),
        *x.tensor_split(torch.tensor([2, 3]), 1), *x.tensor_split(torch.tensor(2), -1),
        *torch.split(x, [2, 5], -1),
    ), (r(2, 5, 7),)),
    "stack_family": (lambda a, v, s: (
        torch.stack([a, a + 1], 1), torch.stack([a, a], -1), torch.hstack([a, a]),
        torch.hstack([v, v]), torch.vstack([a, v[:3]]), torch.row_stack([v[:3], v[:3]]),
        torch.dstack([a, a]), torch.dstack([v, v]), torch.column_stack([v[:2], a, v[:2]]),
        torch.atleast_1d(s), torch.atleast_2d(s), torch.atleast_2d(v), torch.atleast_3d(s),
        torch.atleast_3d(v), torch.atleast_3d(a), *torch.atleast_2d([v, a]),
        torch.cat([a, a.long()], 0),
    ), (r(2, 3), r(5), r(())),),
    "pixel_channel_shuffle": (lambda x, y: (
        F.pixel_shuffle(x, 2), F.pixel_unshuffle(y, 2), F.channel_shuffle(x, 4),
        torch.nn.ChannelShuffle(2)(y), F.pixel_shuffle(x.unsqueeze(0), 2),
    ), (r(2, 8, 3, 2), r(1, 2, 4, 6))),
    "diff": (lambda x, p: (
        torch.diff(x), torch.diff(x, n=2, dim=0), torch.diff(x, dim=1, prepend=p, append=p[:, :2]),
        torch.diff(x, n=3, dim=-1, append=x),
    ), (r(4, 5), r(4, 1))),
}

CASES.update({
    "diff_int": (lambda i: (torch.diff(i), torch.diff(i, n=2, dim=0, append=i[:1])), (ints(3, 4),)),
    "sizes_from_the_graph": (lambda x, y: (
        x.repeat(1, y.size(0)), x.unflatten(1, (y.size(0), -1)), x.narrow(1, torch.tensor(1), 2),
        x.view(y.size(0), -1), x.expand(y.size(1), -1, -1), torch.tile(x, (y.size(0),)),
    ), (r(3, 4), r(2, 5))),
})

KHRONOS_REFUSES = {
    # standard NNEF has no integer arithmetic
    "diff_int": "aten::diff",
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_shape_ops(name):
    fn, args = CASES[name]
    check_export(Lambda(fn), args, khronos_refuses=KHRONOS_REFUSES.get(name, False))


def movement(x):
    return (
        x.reshape(-1), x.permute(2, 0, 1), x.flip(-1), x.roll(1, 0), x[:, ::2, 1:], x.unbind(0)[1],
        x.chunk(2, 2)[1], torch.cat([x, x], 1), torch.stack([x, x]), x.repeat(1, 2, 1),
        x.repeat_interleave(2, 1), x.expand(2, 2, 3, 4), x.unsqueeze(1).squeeze(1), x.mT,
    )


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool, torch.float16, torch.int32])
def test_movement_keeps_dtype(dtype):
    x = torch.randint(0, 2 if dtype is torch.bool else 100, (2, 3, 4)).to(dtype)
    # Standard NNEF moves integer and logical tensors too; f16 and i32 inputs need tract.
    targets = ("tract", "khronos") if dtype in (torch.int64, torch.bool) else ("tract",)
    check_export(Lambda(movement), (x,), targets=targets)


class DynamicMovement(torch.nn.Module):
    """Every size below comes from the graph, so it follows the symbol T."""

    def forward(self, x, z):
        a, b = x.chunk(2, dim=1)
        y = x.flip(1) + x.roll(1, 1) * 0.5 + x.roll(-2, 1) * 0.25
        up = F.pixel_shuffle(z, 2)
        return (
            y.unflatten(0, (1, -1)), a * 2, b, x.narrow(1, 1, 2),
            x.repeat_interleave(2, dim=1), up, F.pixel_unshuffle(up, 2), F.channel_shuffle(z, 2),
            torch.diff(x, dim=1), x[:, -3:], x.repeat(1, 2), x.unsqueeze(0).mT, x.movedim(1, 0),
        )


def test_dynamic_axis_flows_through_movement():
    check_dynamic(DynamicMovement(), lambda T: (torch.randn(2, T), torch.randn(1, 8, 2, T)),
                  {"input_0": {1: "T"}, "input_1": {3: "T"}}, sizes=[{"T": 8}, {"T": 5}, {"T": 4}])


def test_split_along_a_dynamic_axis_is_reported_as_baked():
    with pytest.warns(BakedSizeWarning, match="split"):
        t2n.compile(Lambda(lambda x: x.split(2, dim=1)), (torch.randn(2, 6),), dynamic_axes={"input_0": {1: "T"}})


def test_diff_of_bool_is_xor():
    # tract only for now: the Khronos 'xor' emitter writes ne() on logical tensors, which
    # the Khronos parser rejects (reported to the elementwise owner).
    b = torch.rand(3, 4) > 0.5
    check_export(Lambda(lambda b: (torch.diff(b), torch.diff(b, dim=0, prepend=b[-1:]))), (b,), targets=("tract",))


def test_reverse_evaluator_is_torch_flip():
    # The IR evaluator folds constants and is the oracle: it must agree with torch.flip.
    import numpy as np

    from t2n.ir import OpSet

    x = np.arange(24).reshape(2, 3, 4)
    out = OpSet.default().get("reverse").evaluate([x], {"axes": (0, 2)})[0]
    assert np.array_equal(out, torch.flip(torch.from_numpy(x), (0, 2)).numpy())


def test_slicing_the_one_piece_of_an_unbind():
    """Iterating a tensor of one item gives one piece; slicing it (Pixtral's
    ``[e[..., :h, :w] for e in patch_embeds]``) slices the tensor, not a list."""
    check_export(Lambda(lambda x: [e[..., :2, 1:] for e in x][0].flatten(1)), (r(1, 3, 4, 4),),
                 targets=("tract",))
