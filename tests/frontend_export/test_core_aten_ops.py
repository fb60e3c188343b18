"""Core-ATen ops as torch.export programs spell them (after ``run_decompositions()``),
called directly through ``torch.ops.aten`` so the jit frontend records the same names
and argument forms; each case runs in tract and in the Khronos interpreter."""

from __future__ import annotations

import pytest
import torch

from t2n import LoweringRegistry, compile
from t2n.backends.tract.target import TractNNEF
from t2n.errors import UnsupportedOpsError
from t2n.frontend.lowering import core_aten
from t2n.testing import Lambda, check_dynamic, check_export, check_fn

A = torch.ops.aten


def r(*shape: int) -> torch.Tensor:
    return torch.randn(*shape)


def idx(*shape: int, high: int = 4) -> torch.Tensor:
    return torch.randint(0, high, shape)


# Each case: (function of tensors, inputs). The forms are those run_decompositions()
# leaves in the programs of t2n's layer and architecture suites.
SHARED_RULES = {
    "_softmax": (lambda x: A._softmax(x, 1, False), (r(2, 5, 3),)),
    "_log_softmax": (lambda x: A._log_softmax(x, -1, False), (r(3, 7),)),
    "native_layer_norm": (lambda x, w, b: A.native_layer_norm(x, [6], w, b, 1e-5)[0],
                          (r(2, 3, 6) * 2 + 1, r(6), r(6))),
    "native_layer_norm_no_affine": (lambda x: A.native_layer_norm(x, [3, 4], None, None, 1e-3)[0],
                                    (r(2, 3, 4),)),
    "native_group_norm": (lambda x, w, b: A.native_group_norm(x, w, b, 2, 4, 15, 2, 1e-5)[0],
                          (r(2, 4, 5, 3), r(4), r(4))),
    "batch_norm_no_training": (
        lambda x, w, b, m, v: A._native_batch_norm_legit_no_training(x, w, b, m, v, 0.1, 1e-5)[0],
        (r(2, 3, 4, 4), r(3), r(3), r(3), r(3).abs() + 0.5)),
    "batch_norm_no_stats": (lambda x: A._native_batch_norm_legit.no_stats(x, None, None, True, 0.1, 1e-5)[0],
                            (r(4, 3, 5) * 3 + 1,)),
    "convolution_2d": (lambda x, w, b: A.convolution(x, w, b, [2, 1], [1, 0], [1, 1], False, [0, 0], 1),
                       (r(1, 4, 7, 6), r(6, 4, 3, 3), r(6))),
    "convolution_grouped_no_bias": (lambda x, w: A.convolution(x, w, None, [1], [2], [2], False, [0], 2),
                                    (r(2, 4, 9), r(6, 2, 3))),
    "convolution_transposed": (lambda x, w: A.convolution(x, w, None, [2, 2], [1, 1], [1, 1], True, [1, 1], 1),
                               (r(1, 3, 4, 5), r(3, 2, 3, 3))),
    "_to_copy_dtype": (lambda x: A._to_copy(x, dtype=torch.int64) + 1, (r(3, 4) * 5,)),
    "_to_copy_same": (lambda x: A._to_copy(x) * 2, (r(3, 4),)),
    "addmm": (lambda b, x, w: A.addmm(b, x, w), (r(5), r(3, 4), r(4, 5))),
    "addmm_beta_alpha": (lambda b, x, w: A.addmm(b, x, w, beta=0.5, alpha=2.0), (r(3, 5), r(3, 4), r(4, 5))),
    "mm": (lambda x, w: A.mm(x, w), (r(3, 4), r(4, 2))),
    "bmm": (lambda x, w: A.bmm(x, w), (r(2, 3, 4), r(2, 4, 5))),
    "expand": (lambda x: A.expand(x, [2, -1, 4]), (r(3, 1),)),
    "permute": (lambda x: A.permute(x, [2, 0, 1]), (r(2, 3, 4),)),
    "view": (lambda x: A.view(x, [4, -1]), (r(2, 3, 4),)),
    "_unsafe_view": (lambda x: A._unsafe_view(x, [6, 4]), (r(2, 3, 4),)),
    "clone": (lambda x: A.clone(x, memory_format=torch.contiguous_format) + 1, (r(2, 3),)),
    "alias": (lambda x: A.alias(x) * 3, (r(2, 3),)),
    "lift_fresh_copy": (lambda x: A.lift_fresh_copy(x) - 1, (r(4),)),
    "full": (lambda x: x + A.full([2, 3], 1.5, dtype=torch.float32), (r(2, 3),)),
    "full_like": (lambda x: A.full_like(x, 7.0) * x, (r(2, 3),)),
    "empty_memory_format_copied": (lambda x: A.copy(A.empty.memory_format([3], dtype=torch.float32), x) + 1,
                                   (r(3),)),
    "scalar_tensor": (lambda x: x * A.scalar_tensor(2.5, dtype=torch.float32), (r(3),)),
    "arange_start_step": (lambda x: x + A.arange.start_step(1, 13, 3, dtype=torch.float32), (r(2, 4),)),
    "index_tensor_with_none": (lambda x, i: A.index.Tensor(x, [None, i]), (r(3, 5, 2), idx(4, high=5))),
    "index_tensor_two": (lambda x, i, j: A.index.Tensor(x, [i, j]), (r(4, 5), idx(3), idx(3, high=5))),
    "_unsafe_index": (lambda x, i: A._unsafe_index(x, [None, None, i]), (r(1, 2, 6), idx(9, high=6))),
    "amax": (lambda x: A.amax(x, [1], True), (r(3, 4, 2),)),
    "var_correction": (lambda x: A.var.correction(x, [1], correction=1, keepdim=True), (r(3, 6),)),
    "var_correction_zero": (lambda x: A.var.correction(x, [0, 1], correction=0), (r(3, 6),)),
    "mean_dim": (lambda x: A.mean.dim(x, [-1], True), (r(3, 6),)),
    "max_pool2d_with_indices": (lambda x: A.max_pool2d_with_indices(x, [3, 3], [2, 2], [1, 1])[0],
                                (r(1, 2, 7, 8),)),
    "max_pool3d_with_indices": (lambda x: A.max_pool3d_with_indices(x, [2, 2, 2], [2, 2, 2])[0],
                                (r(1, 2, 4, 4, 4),)),
    "avg_pool2d": (lambda x: A.avg_pool2d(x, [2, 2], [2, 2], [1, 1], False, False), (r(1, 3, 6, 5),)),
    "avg_pool3d": (lambda x: A.avg_pool3d(x, [2, 2, 2], [1, 1, 1]), (r(1, 2, 3, 4, 4),)),
    "_adaptive_avg_pool2d": (lambda x: A._adaptive_avg_pool2d(x, [1, 1]), (r(2, 3, 5, 4),)),
    "_adaptive_avg_pool3d": (lambda x: A._adaptive_avg_pool3d(x, [1, 1, 1]), (r(1, 3, 2, 4, 4),)),
    "upsample_nearest2d_vec": (lambda x: A.upsample_nearest2d.vec(x, None, [2.0, 2.0]), (r(1, 2, 3, 4),)),
    "upsample_nearest2d_vec_size": (lambda x: A.upsample_nearest2d.vec(x, [6, 5], None), (r(1, 2, 3, 4),)),
    "upsample_bilinear2d_vec": (lambda x: A.upsample_bilinear2d.vec(x, [6, 8], False, None), (r(1, 2, 3, 4),)),
    "upsample_bilinear2d_vec_corners": (lambda x: A.upsample_bilinear2d.vec(x, None, True, [2.0, 2.0]),
                                        (r(1, 2, 3, 4),)),
    "constant_pad_nd": (lambda x: A.constant_pad_nd(x, [1, 2, 0, 1], 0.5), (r(1, 2, 3, 4),)),
    "split_with_sizes": (lambda x: A.split_with_sizes(x, [1, 3, 2], 1)[1], (r(2, 6),)),
    "where_self": (lambda c, x, y: A.where.self(c, x, y), (r(3, 4) > 0, r(3, 4), r(1, 4))),
    "slice_tensor": (lambda x: A.slice.Tensor(x, 1, 1, 9223372036854775807, 2), (r(2, 7),)),
    "select_int": (lambda x: A.select.int(x, 1, -1), (r(2, 5, 3),)),
    "unsqueeze": (lambda x: A.unsqueeze(x, -1), (r(2, 3),)),
    "squeeze_dims": (lambda x: A.squeeze.dims(x, [1, 3]), (r(2, 1, 3, 1),)),
    "rsub_scalar": (lambda x: A.rsub.Scalar(x, 1.0), (r(2, 3),)),
    "pow_tensor_scalar": (lambda x: A.pow.Tensor_Scalar(x, 3), (r(2, 3),)),
    "pow_tensor_tensor": (lambda x, y: A.pow.Tensor_Tensor(x, y), (r(2, 3).abs() + 0.5, r(2, 3))),
    "embedding": (lambda w, i: A.embedding(w, i), (r(10, 4), idx(2, 3, high=10))),
    "gather": (lambda x, i: A.gather(x, 1, i), (r(3, 5), idx(3, 2, high=5))),
    "index_put": (lambda x, i, v: A.index_put(x, [i], v), (r(5, 3), torch.tensor([0, 3]), r(2, 3))),
    "index_put_accumulate": (lambda x, i, v: A.index_put(x, [None, i], v, True),
                             (r(2, 5), torch.tensor([1, 4]), r(2, 2))),
    "slice_scatter": (lambda x, s: A.slice_scatter(x, s, 1, 1, 3), (r(2, 5), r(2, 2))),
    "copy": (lambda x, y: A.copy(x, y), (r(2, 3), r(1, 3))),
    "any_dim": (lambda x: A.any.dim(x > 0, 1).to(torch.float32), (r(3, 4),)),
    "cumsum": (lambda x: A.cumsum(x, 1), (r(2, 5),)),
    "repeat": (lambda x: A.repeat(x, [2, 1, 3]), (r(2, 3),)),
    "flip": (lambda x: A.flip(x, [0, 2]), (r(2, 3, 4),)),
    "linalg_vector_norm": (lambda x: A.linalg_vector_norm(x, 2, [1], True), (r(3, 4),)),
    "clamp": (lambda x: A.clamp(x, -0.5, 0.5), (r(3, 4),)),
    "hardtanh": (lambda x: A.hardtanh(x, -1.0, 2.0), (r(3, 4) * 2,)),
    "gelu_tanh": (lambda x: A.gelu(x, approximate="tanh"), (r(3, 4),)),
}


# Standard NNEF has no gather/scatter by index tensors and no integer arithmetic: the
# Khronos export of these is refused, naming the op (tract runs them).
KHRONOS_REFUSES = {"_to_copy_dtype": "aten::add", "index_put": "aten::index_put",
                   "index_put_accumulate": "aten::index_put"}


@pytest.mark.parametrize("name", sorted(SHARED_RULES))
def test_core_aten_form_runs_in_both_engines(name: str) -> None:
    fn, args = SHARED_RULES[name]
    res = check_fn(fn, *args, khronos_refuses=KHRONOS_REFUSES.get(name, False))
    assert set(res.reports) | set(res.refused) == {"tract", "khronos"}


# -- rules of their own --------------------------------------------------------------
def test_as_strided_window_view() -> None:
    x = r(4, 6)
    res = check_fn(lambda t: A.as_strided(t, [3, 2, 2], [6, 2, 1], 1) * 2, x)
    assert "aten::as_strided" in res.artifacts["tract"].ir.info.aten_ops


def test_as_strided_overlapping_windows() -> None:
    check_fn(lambda t: A.as_strided(t, [4, 3], [2, 1]), r(12))


def test_as_strided_reads_past_a_view_into_its_base() -> None:
    # PyTorch reads past a view's end into its base's storage: the rule gathers from the
    # base (tests/ops/test_strided_storage.py has the other views and the refusals).
    check_fn(lambda t: A.as_strided(t[:6], [2, 3], [3, 2]), r(12), targets=("tract",))


def test_as_strided_past_every_tensor_is_refused() -> None:
    # the input is an example view of a larger tensor; the artifact's input holds 6 elements
    with pytest.raises(UnsupportedOpsError, match=r"aten::as_strided[\s\S]*reads storage position 6"):
        check_fn(lambda t: A.as_strided(t, [2, 4], [4, 1]), r(12)[:6], targets=("tract",))


def test_strided_indices_follow_strides_and_offset() -> None:
    assert core_aten.strided_indices([2, 3], [3, 1], 1).tolist() == [[1, 2, 3], [4, 5, 6]]


def _bn_functional(training: bool):
    def fn(x, w, b, m, v):
        out, _, _, new_m, new_v = A._native_batch_norm_legit_functional(x, w, b, m, v, training, 0.2, 1e-3)
        return out, new_m, new_v
    return fn


@pytest.mark.parametrize("training", [True, False])
def test_native_batch_norm_functional(training: bool) -> None:
    args = (r(4, 3, 5) * 2 + 1, r(3), r(3), r(3), r(3).abs() + 0.5)
    check_fn(_bn_functional(training), *args)


def test_native_batch_norm_functional_saved_stats_are_refused() -> None:
    fn = lambda x, m, v: A._native_batch_norm_legit_functional(x, None, None, m, v, True, 0.1, 1e-5)[1]  # noqa: E731
    with pytest.raises(UnsupportedOpsError, match="saved statistics of a batch norm"):
        check_fn(fn, r(2, 3, 4), r(3), r(3).abs(), targets=("tract",))


# -- size queries: jit records them as aten::size / aten::numel, so the sym_* rules are
# run in those nodes' place (same arguments: the tensor and the axis).
def _sizes_through(rules: dict[str, object]) -> LoweringRegistry:
    return LoweringRegistry.default().extended(rules, override=True)  # type: ignore[arg-type]


def test_sym_size_static() -> None:
    reg = _sizes_through({"aten::size": core_aten.sym_size, "aten::numel": core_aten.sym_numel})
    check_fn(lambda x: x.reshape(x.size(0) * x.size(2), -1) * x.numel(), r(2, 3, 4), registry=reg)


def test_sym_size_follows_dynamic_axis() -> None:
    reg = _sizes_through({"aten::size": core_aten.sym_size, "aten::numel": core_aten.sym_numel})
    model = Lambda(lambda x: x.reshape(x.size(0) * x.size(1), -1) + x.numel())
    check_dynamic(model, lambda n: (r(n, 3, 4),), {"x": {0: "n"}}, [{"n": 2}, {"n": 5}],
                  registry=reg, input_names=["x"])


def test_sym_stride_row_major() -> None:
    reg = _sizes_through({"aten::size": core_aten.sym_stride})
    x = r(2, 3, 4)
    art = compile(Lambda(lambda t: t * t.size(0) + t.size(1)), (x,), TractNNEF(), registry=reg)
    art.check("approximate", inputs=[x.numpy()], expected=[(x * 12 + 4).numpy()])


def test_sym_stride_follows_dynamic_axis() -> None:
    reg = _sizes_through({"aten::size": core_aten.sym_stride})
    x = r(2, 3, 4)
    art = compile(Lambda(lambda t: t * t.size(0)), (x,), TractNNEF(), registry=reg,
                  dynamic_axes={"x": {2: "k"}}, input_names=["x"])
    y = r(2, 3, 7)
    art.check("approximate", inputs=[y.numpy()], expected=[(y * 21).numpy()])


# -- through the export frontend (the programs where these names come from) ------------
class TrainingBatchNorm(torch.nn.Module):
    """Batch statistics with running buffers: the program writes the updated running
    statistics back, and the forward returns them after the write."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("running_mean", torch.rand(3))
        self.register_buffer("running_var", torch.rand(3) + 0.5)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        y = torch.nn.functional.batch_norm(x, self.running_mean, self.running_var, training=True,
                                           momentum=0.2, eps=1e-3)
        return y, self.running_mean.clone(), self.running_var.clone()


def test_functional_batch_norm_updates_buffers_through_export() -> None:
    res = check_export(TrainingBatchNorm(), (r(4, 3, 5) * 2 + 1,), frontend="export")
    assert "aten::_native_batch_norm_legit_functional" in res.artifacts["tract"].ir.info.aten_ops


def test_as_strided_through_export() -> None:
    res = check_fn(lambda t: A.as_strided(t, [3, 2, 2], [6, 2, 1], 1) * 2, r(4, 6), frontend="export")
    assert "aten::as_strided" in res.artifacts["khronos"].ir.info.aten_ops
