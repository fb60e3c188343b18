"""Matrix products, convolutions, pooling, resampling, softmax and normalizations of
standard NNEF (tract's are in :mod:`t2n.backends.tract.reader.nn`)."""

from __future__ import annotations

from t2n.backends.nnef.reader.optable import Args, ReadOpTable, TensorVal, tensor
from t2n.errors import IRError
from t2n.ir import OpSet, Sym, TensorType
from t2n.ir.dims import Dim
from t2n.ir.schema import InferContext

COMMON = ReadOpTable("nn")


@COMMON.op("matmul", "A, B, transposeA = false, transposeB = false")
def _matmul(a: Args) -> list[TensorVal]:
    x, w = a.tensor("A"), a.tensor("B")
    # a block-quantized weight is read with the other operand's float type
    types = (x.type, TensorType(x.dtype, w.shape))
    attrs = {"transpose_a": a.flag("transposeA"), "transpose_b": a.flag("transposeB")}
    try:
        out = OpSet.default().get("matmul").infer(InferContext(types, attrs, (None, None)))[0]
    except (IRError, ValueError) as exc:
        raise a.fail(str(exc)) from None
    return [TensorVal(out)]


@COMMON.op("linear", "input, filter, bias = 0.0")
def _linear(a: Args) -> list[TensorVal]:
    """``matmul(input, filter, transposeB = true) + bias`` (the standard fragment; any rank)."""
    x, w = a.tensor("input"), a.tensor("filter")
    types = (x.type, TensorType(x.dtype, w.shape))
    try:
        out = OpSet.default().get("matmul").infer(InferContext(types, {"transpose_b": True}, (None, None)))[0]
    except (IRError, ValueError) as exc:
        raise a.fail(str(exc)) from None
    return [TensorVal(out)]


def window_dim(size: Dim, k: int, stride: int, dilation: int, pad: tuple[int, int] | None) -> Dim:
    """An output size of a windowed op; ``pad`` None is NNEF's automatic padding
    (the output is the input divided by the stride, rounded up)."""
    if pad is None:
        return (size + (stride - 1)) // stride
    return (size + pad[0] + pad[1] - dilation * (k - 1) - 1) // stride + 1


def unwindow_dim(size: Dim, k: int, stride: int, dilation: int, pad: tuple[int, int] | None) -> Dim:
    """The output size of a transposed windowed op (deconv, debox)."""
    if pad is None:
        return size * stride
    return (size - 1) * stride + dilation * (k - 1) + 1 - pad[0] - pad[1]


def _geometry(a: Args, n: int) -> tuple[list[tuple[int, int] | None], list[int], list[int]]:
    pads = a.pairs("padding")
    stride = a.ints("stride") or [1] * n
    dilation = a.ints("dilation") or [1] * n
    return ([None] * n if not pads else list(pads)), stride, dilation


def _kernel(a: Args, w: TensorVal) -> list[int]:
    ks = list(w.shape[2:])
    if any(isinstance(k, Sym) for k in ks):
        raise a.fail("kernel sizes must be static")
    return [int(k) for k in ks]


CONV_SIGNATURE = ("input, filter, bias = 0.0, border = 'constant', padding = [], stride = [], dilation = [], "
                  "groups = 1, group = 1, a0 = 0, a_scale = 1.0, b0 = 0, b_scale = 1.0, c0 = 0, c_scale = 1.0, "
                  "output_dt = ''")
"""``conv``'s parameters, with those of tract's quantized form (which reads the same)."""


@COMMON.op("conv", CONV_SIGNATURE)
def conv_result(a: Args) -> list[TensorVal]:
    x, w = a.tensor("input"), a.tensor("filter")
    ks = _kernel(a, w)
    pads, stride, dilation = _geometry(a, len(ks))
    spatial = [window_dim(x.shape[2 + i], ks[i], stride[i], dilation[i], pads[i]) for i in range(len(ks))]
    dtype = a.dtype("output_dt") if a.text("output_dt") else x.dtype
    return [tensor(dtype, [x.shape[0], w.shape[0], *spatial])]


@COMMON.op("deconv", "input, filter, bias = 0.0, border = 'constant', padding = [], stride = [], "
                  "dilation = [], output_shape = [], groups = 1")
def _deconv(a: Args) -> list[TensorVal]:
    x, w = a.tensor("input"), a.tensor("filter")
    out = a.dims("output_shape")
    if out:
        return [tensor(x.dtype, out)]
    ks = _kernel(a, w)
    pads, stride, dilation = _geometry(a, len(ks))
    spatial = [unwindow_dim(x.shape[2 + i], ks[i], stride[i], dilation[i], pads[i]) for i in range(len(ks))]
    # tract reads a deconv filter as [O, C / groups, k...]
    return [tensor(x.dtype, [x.shape[0], w.shape[0], *spatial])]


def _pool_dims(a: Args, x: TensorVal) -> list[Dim]:
    size = a.ints("size")
    pads, stride, dilation = _geometry(a, len(size))
    return [window_dim(x.shape[i], size[i], stride[i], dilation[i], pads[i]) for i in range(len(size))]


@COMMON.op(["max_pool", "avg_pool", "rms_pool", "box"],
        "input, size, border = 'constant', padding = [], stride = [], dilation = [], normalize = false")
def _pool(a: Args) -> list[TensorVal]:
    x = a.tensor("input")
    return [tensor(x.dtype, _pool_dims(a, x))]


@COMMON.op(["max_pool_with_index"], "input, size, border = 'constant', padding = [], stride = [], dilation = []")
def _pool_index(a: Args) -> list[TensorVal]:
    from t2n.ir import DType

    x = a.tensor("input")
    dims = _pool_dims(a, x)
    return [tensor(x.dtype, dims), tensor(DType.I64, dims)]


@COMMON.op("debox", "input, size, border = 'constant', padding = [], stride = [], dilation = [], "
                 "output_shape = [], normalize = false")
def _debox(a: Args) -> list[TensorVal]:
    x = a.tensor("input")
    out = a.dims("output_shape")
    if out:
        return [tensor(x.dtype, out)]
    size = a.ints("size")
    pads, stride, dilation = _geometry(a, len(size))
    return [tensor(x.dtype, [unwindow_dim(x.shape[i], size[i], stride[i], dilation[i], pads[i])
                             for i in range(len(size))])]


def _resample(up: bool):  # type: ignore[no-untyped-def]
    def infer(a: Args) -> list[TensorVal]:
        x = a.tensor("input")
        factor = a.ints("factor")
        dims = list(x.shape)
        for i, f in enumerate(factor):
            dims[2 + i] = dims[2 + i] * f if up else dims[2 + i] // f
        return [tensor(x.dtype, dims)]

    return infer


COMMON.op(["nearest_upsample"], "input, factor")(_resample(True))
COMMON.op(["multilinear_upsample"], "input, factor, method = 'symmetric', border = 'replicate'")(_resample(True))
COMMON.op(["nearest_downsample", "area_downsample"], "input, factor")(_resample(False))


SOFTMAX_SIGNATURE = "x, axes = [1], exp = ''"


@COMMON.op("softmax", SOFTMAX_SIGNATURE)
def softmax_result(a: Args) -> list[TensorVal]:
    return [TensorVal(a.tensor("x").type)]


NORM_SIGNATURE = ("input, axes = [], size = [], bias = 0.0, epsilon = 0.0, alpha = 1.0, beta = 0.5, "
                  "axis = 0, eps = 0.0, mean = 0.0, variance = 1.0, offset = 0.0, scale = 1.0")
"""The parameters of the normalizations (standard and tract's), which keep their input's type."""


@COMMON.op(["l1_normalization", "l2_normalization", "local_response_normalization",
            "local_mean_normalization", "local_variance_normalization", "local_contrast_normalization",
            "batch_normalization"], NORM_SIGNATURE)
def same_type(a: Args) -> list[TensorVal]:
    return [TensorVal(a.tensor("input").type)]
