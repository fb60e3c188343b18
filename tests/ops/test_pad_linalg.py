"""Padding and matrix-product forms, checked in tract and in the Khronos interpreter."""

import pytest
import torch
import torch.nn.functional as F

from t2n.testing import Lambda, check_dynamic, check_export

torch.manual_seed(0)  # the cases below draw their inputs at import


def r(*shape):
    return torch.randn(*shape)


def pads(mode):
    def fn(x1, x2, x3):
        return (
            F.pad(x1, (1, 2), mode=mode), F.pad(x2, (2, 1, 1, 0), mode=mode),
            F.pad(x3, (1, 1, 0, 2, 2, 1), mode=mode), F.pad(x1, (-1, 2), mode=mode),
            F.pad(x2, (1, -2, -1, 1), mode=mode), F.pad(x3, (0, 0, 1, 0, 0, 0), mode=mode),
        )
    return fn


PAD_ARGS = (r(2, 3, 5), r(1, 2, 4, 5), r(1, 2, 3, 4, 5))

CASES = {
    **{f"pad_{m}": (pads(m), PAD_ARGS) for m in ("constant", "reflect", "replicate", "circular")},
    "pad_modules_and_values": (lambda x, y: (
        torch.nn.ReflectionPad1d(2)(x), torch.nn.ReplicationPad1d((0, 3))(x), torch.nn.ZeroPad2d((1, 0, 2, 1))(y),
        torch.nn.ConstantPad1d(1, 2.5)(x), torch.nn.ReflectionPad2d(1)(y), torch.nn.ReplicationPad2d(1)(y),
        torch.nn.CircularPad1d(2)(x), F.pad(x, (1, 1), value=-3.0), F.pad(y, (1, 1, 1, 1, 1, 1, 1, 1)),
        F.pad(x[0], (2, 1), mode="reflect"), F.pad(x, (-2, -1)), torch.nn.ReflectionPad3d(1)(y.unsqueeze(0)),
        torch.nn.ReplicationPad3d((1, 0, 0, 1, 2, 0))(y.unsqueeze(0)),
    ), (r(2, 3, 6), r(1, 2, 4, 5))),
    # the aten ops F.pad dispatches to, called directly (scripted models keep them)
    "pad_aten_ops": (lambda x, y: (
        torch.constant_pad_nd(x, (1, 2), 3.0), torch.constant_pad_nd(y, (0, -1, 1, 1)),
        torch._C._nn.reflection_pad1d(x, [1, 2]), torch._C._nn.reflection_pad2d(y, [1, 0, 2, 1]),
        torch._C._nn.reflection_pad3d(y.unsqueeze(0), [1] * 6), torch._C._nn.replication_pad1d(x, [0, 2]),
        torch._C._nn.replication_pad2d(y, [1, 0, 2, 1]), torch._C._nn.replication_pad3d(y.unsqueeze(0), [1, 0] * 3),
        torch._C._nn._pad_circular(x, [1, 1]), torch._C._nn._pad_circular(y, [-1, 2, 1, 0]),
        *(torch._C._nn._pad_enum(x, [2, 1], k, None) for k in range(3)), torch._C._nn._pad_enum(x, [2, 1], 3, 1.5),
    ), (r(2, 3, 6), r(1, 2, 4, 5))),
}
KHRONOS_REFUSES: dict[str, str] = {}


@pytest.mark.parametrize("name", sorted(CASES))
def test_ops(name):
    fn, args = CASES[name]
    check_export(Lambda(fn), args, khronos_refuses=KHRONOS_REFUSES.get(name, False))


MATMUL_CASES = {
    "einsum": (lambda a, b, m, v: (
        torch.einsum("bij,bjk->bik", a, b), torch.einsum("bij,bkj->bki", a, a), torch.einsum("ij,jk", m, m.T),
        torch.einsum("i,j->ij", v, v), torch.einsum("i,i->", v, v), torch.einsum("ii->i", m),
        torch.einsum("ii", m), torch.einsum("ij->", m), torch.einsum("ij->ji", m), torch.einsum("bii->bi", b[:, :, :4]),
        torch.einsum("...ij,...jk->...ik", a, b), torch.einsum("...ij,jk", a, m), torch.einsum("b...,b...->...", a, a),
        torch.einsum("ij,jk,kl->il", m, m, m), torch.einsum("bij,bjk,b->bik", a, b, v[:2]),
        torch.einsum("i j , j k -> i k", m, m), torch.einsum("bij->j", a), torch.einsum("...ii->...i", b[:, :, 1:]),
        torch.einsum("ab,cd->abcd", m[:2, :2], m[:2]), torch.einsum(a, [0, 1, 2], a, [0, 3, 2], [0, 1, 3]),
    ), (r(2, 3, 4), r(2, 4, 5), r(4, 4), r(4))),
    "einsum_broadcast": (lambda x, y: (
        torch.einsum("...ij,...jk->...ik", x, y), torch.einsum("bhqd,bhkd->bhqk", x, x),
    ), (r(2, 1, 3, 4), r(5, 4, 2))),
    "products": (lambda a, b, m, v, w: (
        torch.tensordot(a, b, dims=([1, 2], [2, 1])), torch.tensordot(m, m.T, dims=1), torch.tensordot(a, m, dims=0),
        torch.tensordot(m, m, dims=([0], [0])), torch.outer(v, w), torch.ger(w, v), torch.dot(v, v), torch.vdot(w, w),
        torch.inner(m, a), torch.inner(v, v), torch.inner(m, torch.tensor(2.0)), torch.mv(m, v[:3]),
        torch.kron(m, m[:2]), torch.kron(v, a), torch.linalg.matrix_power(m[:3], 3),
        torch.matrix_power(m[:3], 1), torch.linalg.matrix_power(a[:, :3], 0), torch.linalg.matrix_power(a[:, :3], 6),
        torch.linalg.cross(a[:, :, :3], b[:, :, :3].mT[:, :1]), torch.cross(m[:3, :2], m[:3, 1:], dim=0),
    ), (r(2, 4, 3), r(2, 3, 4), r(4, 3), r(4), r(3))),
    "addmm_family": (lambda i, x, y, v, bb: (
        torch.addmm(i, x[0], y[0], beta=0.5, alpha=2.0), torch.addmm(i[0], x[0], y[0]),
        torch.baddbmm(i, x, y, beta=0.0, alpha=-1), torch.baddbmm(i, x, y), torch.addbmm(i, x, y, alpha=3),
        torch.addmv(v, x[0], y[0, :, 0], beta=2), torch.addmv(v[0], x[1], y[1, :, 1]),
    ), (r(3, 5), r(2, 3, 4), r(2, 4, 5), r(3), r(2))),
    "bilinear": (lambda x1, x2: (
        torch.nn.functional.bilinear(x1, x2, torch.ones(2, 4, 3) * 0.5, torch.tensor([1.0, -1.0])),
        torch.nn.functional.bilinear(x1[0], x2[0], torch.arange(24.0).reshape(2, 4, 3) / 10),
    ), (r(5, 2, 4), r(5, 2, 3))),
    "nn_bilinear": (torch.nn.Bilinear(4, 3, 6), (r(5, 4), r(5, 3))),
}


@pytest.mark.parametrize("name", sorted(MATMUL_CASES))
def test_matmul_forms(name):
    fn, args = MATMUL_CASES[name]
    check_export(fn if isinstance(fn, torch.nn.Module) else Lambda(fn), args)


class DynamicPadsAndProducts(torch.nn.Module):
    """Pads along the symbolic axis T, and contractions over it and beside it."""

    def forward(self, x, w):
        return (
            F.pad(x, (1, 2)), F.pad(x, (2, 1), mode="reflect"), F.pad(x, (0, 3), mode="replicate"),
            F.pad(x, (2, 1), mode="circular"), F.pad(x, (-1, 1, 1, 0)),
            torch.einsum("bct,bdt->bcd", x, x), torch.einsum("bct,cd->btd", x, w), torch.einsum("bct->t", x),
            torch.tensordot(x, w, dims=([1], [0])), torch.einsum("bct,bcs->bts", x, x),
        )


def test_dynamic_pads_and_products():
    check_dynamic(DynamicPadsAndProducts(), lambda T: (torch.randn(2, 3, T), torch.randn(3, 4)),
                  {"input_0": {2: "T"}}, sizes=[{"T": 5}, {"T": 3}, {"T": 9}])


def test_integer_and_half_padding_in_tract():
    i = torch.randint(-9, 9, (1, 2, 5))
    # Standard NNEF pads scalar tensors only: an integer pad is refused there.
    check_export(Lambda(lambda i: (F.pad(i, (1, 2), value=7), F.pad(i, (2, 0), mode="reflect"),
                               F.pad(i, (1, 1), mode="circular"))), (i,), khronos_refuses="aten::pad")
    h = torch.randn(1, 2, 5).half()
    check_export(Lambda(lambda h: (F.pad(h, (1, 2), value=0.5), F.pad(h, (2, 2), mode="replicate"))), (h,),
                 targets=("tract",))


def products(a, b, v):
    return (torch.einsum("bij,bjk->bik", a, b), torch.einsum("ii->i", a[0, :, :3]), torch.outer(v, v),
            torch.kron(a[0], v), torch.tensordot(a, b, dims=([1, 2], [2, 1])), torch.dot(v, v.flip(0)),
            torch.linalg.cross(a[..., :3], a[..., :3].flip(-1)), torch.mv(a[0], v[:4]), torch.matmul(a, v),
            torch.matmul(a[0], b), torch.matmul(v[:3], a), torch.linalg.matrix_power(a[:, :, :3], 2))


@pytest.mark.parametrize("dtype", [torch.float16, torch.int64])
def test_products_in_other_dtypes(dtype):
    a, b, v = (torch.randint(-5, 5, s).to(dtype) for s in ((2, 3, 4), (2, 4, 3), (4,)))
    # Standard NNEF multiplies only scalar tensors: integer products are refused there.
    if dtype is torch.int64:
        check_export(Lambda(products), (a, b, v), khronos_refuses="i64 tensors")
    else:
        check_export(Lambda(products), (a, b, v), targets=("tract",))


def _triangular_systems(a, rhs, right):
    solve = torch.linalg.solve_triangular
    return (solve(a, rhs, upper=False), solve(a, rhs, upper=True), solve(a, rhs, upper=False, unitriangular=True),
            solve(a, right, upper=True, left=False), solve(a, right, upper=False, left=False, unitriangular=True),
            solve(a[0, 0, :1, :1], rhs[0, 0, :1], upper=True))


def test_triangular_solves():
    """Both triangles, unit diagonals, ``X A = B``, a 1 x 1 system; 16 x 16 matrices, so
    four squarings of the strict part (the form gated delta-rule attention solves per chunk)."""
    g = torch.Generator().manual_seed(3)
    a = torch.randn(2, 3, 16, 16, generator=g) * 0.5  # the inverses' entries reach the tens
    a.diagonal(dim1=-2, dim2=-1).copy_(1 + torch.rand(2, 3, 16, generator=g))
    check_export(Lambda(_triangular_systems), (a, torch.randn(2, 3, 16, 5, generator=g),
                                               torch.randn(2, 3, 5, 16, generator=g)))


def test_bool_masks_padded():
    """tract's pad cannot run on bool tensors (it refused the artifact, for either value):
    they are padded as bytes."""
    def fn(x):
        mask = x > 0
        return F.pad(mask, (1, 2), value=True).float(), F.pad(mask, (0, 1, 2, 0), value=False).float()
    check_export(Lambda(fn), (r(2, 5),), targets=("tract",))
