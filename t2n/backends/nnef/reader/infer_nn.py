"""Matrix products, convolutions, pooling, resampling, softmax and normalizations."""

from __future__ import annotations

from t2n.backends.nnef.reader.optable import Args, OpTable, TensorVal, tensor
from t2n.errors import IRError
from t2n.ir import OpSet, Sym, TensorType
from t2n.ir.dims import Dim
from t2n.ir.schema import InferContext

OPS = OpTable()


@OPS.op("matmul", "A, B, transposeA = false, transposeB = false")
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


@OPS.op("linear", "input, filter, bias = 0.0")
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


@OPS.op(["conv", "tract_core_qconv"],
        "input, filter, bias = 0.0, border = 'constant', padding = [], stride = [], dilation = [], "
        "groups = 1, group = 1, a0 = 0, a_scale = 1.0, b0 = 0, b_scale = 1.0, c0 = 0, c_scale = 1.0, "
        "output_dt = ''")
def _conv(a: Args) -> list[TensorVal]:
    x, w = a.tensor("input"), a.tensor("filter")
    ks = _kernel(a, w)
    pads, stride, dilation = _geometry(a, len(ks))
    spatial = [window_dim(x.shape[2 + i], ks[i], stride[i], dilation[i], pads[i]) for i in range(len(ks))]
    dtype = a.dtype("output_dt") if a.text("output_dt") else x.dtype
    return [tensor(dtype, [x.shape[0], w.shape[0], *spatial])]


@OPS.op("deconv", "input, filter, bias = 0.0, border = 'constant', padding = [], stride = [], "
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


@OPS.op(["max_pool", "avg_pool", "rms_pool", "box"],
        "input, size, border = 'constant', padding = [], stride = [], dilation = [], normalize = false")
def _pool(a: Args) -> list[TensorVal]:
    x = a.tensor("input")
    return [tensor(x.dtype, _pool_dims(a, x))]


@OPS.op(["max_pool_with_index"], "input, size, border = 'constant', padding = [], stride = [], dilation = []")
def _pool_index(a: Args) -> list[TensorVal]:
    from t2n.ir import DType

    x = a.tensor("input")
    dims = _pool_dims(a, x)
    return [tensor(x.dtype, dims), tensor(DType.I64, dims)]


@OPS.op("debox", "input, size, border = 'constant', padding = [], stride = [], dilation = [], "
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


OPS.op(["nearest_upsample"], "input, factor")(_resample(True))
OPS.op(["multilinear_upsample"], "input, factor, method = 'symmetric', border = 'replicate'")(_resample(True))
OPS.op(["nearest_downsample", "area_downsample"], "input, factor")(_resample(False))


@OPS.op(["softmax", "tract_core_softmax", "tract_core_log_softmax"], "x, axes = [1], exp = ''")
def _softmax(a: Args) -> list[TensorVal]:
    return [TensorVal(a.tensor("x").type)]


@OPS.op(["l1_normalization", "l2_normalization", "local_response_normalization",
         "local_mean_normalization", "local_variance_normalization", "local_contrast_normalization",
         "tract_core_rms_norm", "tract_transformers_rms_norm", "batch_normalization"],
        "input, axes = [], size = [], bias = 0.0, epsilon = 0.0, alpha = 1.0, beta = 0.5, "
        "axis = 0, eps = 0.0, mean = 0.0, variance = 1.0, offset = 0.0, scale = 1.0")
def _same(a: Args) -> list[TensorVal]:
    return [TensorVal(a.tensor("input").type)]


@OPS.op("tract_core_einsum", "inputs, expr, acc = '', output = ''")
def _einsum(a: Args) -> list[TensorVal]:
    xs = a.tensors("inputs")
    expr = a.text("expr").replace(" ", "")
    lhs, _, rhs = expr.partition("->")
    sizes: dict[str, Dim] = {}
    for term, x in zip(lhs.split(","), xs):
        if len(term) != x.rank:
            raise a.fail(f"term {term!r} does not match an input of rank {x.rank}")
        for letter, d in zip(term, x.shape):
            if letter not in sizes or sizes[letter] == 1:
                sizes[letter] = d
    dtype = a.dtype("output") if a.text("output") else xs[0].dtype
    return [tensor(dtype, [sizes[c] for c in rhs])]


@OPS.op("tract_core_grid_sample", "input, grid, mode = 'bilinear', padding_mode = 'zeros', align_corners = false")
def _grid_sample(a: Args) -> list[TensorVal]:
    x, g = a.tensor("input"), a.tensor("grid")
    return [tensor(x.dtype, [x.shape[0], x.shape[1], *g.shape[1:-1]])]
