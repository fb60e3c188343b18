"""Every IR op with a numpy evaluator agrees with PyTorch.

The evaluator serves constant folding and is the oracle of other tests, so it is
checked here against an independent implementation. The table is closed: an op of
``OpSet.default()`` with an evaluator and no case (nor a reason in ``NO_TORCH``)
fails ``test_every_evaluator_has_a_case``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from t2n.ir import DType
from t2n.ir.schema import OpSet
from t2n.ir.tensor_data import ArrayData

RNG = np.random.default_rng(17)


def f32(*shape: int, lo: float = -2.0, hi: float = 2.0) -> np.ndarray:
    return RNG.uniform(lo, hi, shape).astype(np.float32)


def i64(*shape: int, lo: int = -5, hi: int = 6) -> np.ndarray:
    return RNG.integers(lo, hi, shape).astype(np.int64)


def b(*shape: int) -> np.ndarray:
    return RNG.integers(0, 2, shape).astype(bool)


def pos(*shape: int) -> np.ndarray:
    return f32(*shape, lo=0.1, hi=3.0)


def unit(*shape: int) -> np.ndarray:
    return f32(*shape, lo=-0.9, hi=0.9)


T = torch.from_numpy


def _t(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A torch function over the inputs turned into tensors."""
    return lambda xs, a: fn(*[T(x) for x in xs])


Case = tuple[Callable[[], list[np.ndarray]], Mapping[str, Any], Callable[..., Any]]

UNARY_TORCH: dict[str, tuple[Callable[..., np.ndarray], Callable[..., Any]]] = {
    "neg": (f32, torch.neg), "abs": (f32, torch.abs), "sign": (f32, torch.sign),
    "square": (f32, torch.square), "exp": (f32, torch.exp), "expm1": (f32, torch.expm1),
    "log": (pos, torch.log), "log1p": (pos, torch.log1p), "log2": (pos, torch.log2),
    "sqrt": (pos, torch.sqrt), "rsqrt": (pos, torch.rsqrt), "rcp": (pos, torch.reciprocal),
    "sin": (f32, torch.sin), "cos": (f32, torch.cos), "tan": (unit, torch.tan),
    "asin": (unit, torch.asin), "acos": (unit, torch.acos), "atan": (f32, torch.atan),
    "sinh": (f32, torch.sinh), "cosh": (f32, torch.cosh), "tanh": (f32, torch.tanh),
    "asinh": (f32, torch.asinh), "acosh": (lambda *s: f32(*s, lo=1.1, hi=4.0), torch.acosh),
    "atanh": (unit, torch.atanh), "floor": (f32, torch.floor), "ceil": (f32, torch.ceil),
    "round": (lambda *s: np.array([0.5, 1.5, 2.5, -0.5, -1.5, 0.4, 2.6], np.float32), torch.round),
    "trunc": (f32, torch.trunc), "erf": (f32, torch.erf), "sigmoid": (f32, torch.sigmoid),
    "relu": (f32, torch.relu), "silu": (f32, F.silu), "softplus": (f32, F.softplus),
    "hard_swish": (lambda *s: f32(*s, lo=-5, hi=5), F.hardswish),
}

BINARY_TORCH: dict[str, tuple[Callable[..., np.ndarray], Callable[..., Any]]] = {
    "add": (f32, torch.add), "sub": (f32, torch.sub), "mul": (f32, torch.mul),
    "div": (pos, torch.div), "pow": (pos, torch.pow), "atan2": (f32, torch.atan2),
    "min": (f32, torch.minimum), "max": (f32, torch.maximum),
    "and": (b, torch.logical_and), "or": (b, torch.logical_or), "xor": (b, torch.logical_xor),
    "lt": (f32, torch.lt), "gt": (f32, torch.gt), "le": (f32, torch.le), "ge": (f32, torch.ge),
    "eq": (lambda *s: i64(*s, lo=0, hi=2), torch.eq), "ne": (lambda *s: i64(*s, lo=0, hi=2), torch.ne),
    "bitand": (i64, torch.bitwise_and), "bitor": (i64, torch.bitwise_or),
    "bitxor": (i64, torch.bitwise_xor),
}

REDUCE_TORCH: dict[str, tuple[Callable[..., np.ndarray], Callable[..., Any]]] = {
    "sum_reduce": (f32, lambda x, ax, k: torch.sum(x, ax, keepdim=k)),
    "mean_reduce": (f32, lambda x, ax, k: torch.mean(x, ax, keepdim=k)),
    "max_reduce": (f32, lambda x, ax, k: torch.amax(x, ax, keepdim=k)),
    "min_reduce": (f32, lambda x, ax, k: torch.amin(x, ax, keepdim=k)),
    "prod_reduce": (f32, lambda x, ax, k: torch.prod(x, ax[0], keepdim=k)),
    "any_reduce": (b, lambda x, ax, k: torch.any(x, ax[0], keepdim=k)),
    "all_reduce": (b, lambda x, ax, k: torch.all(x, ax[0], keepdim=k)),
    "argmax_reduce": (f32, lambda x, ax, k: torch.argmax(x, ax[0], keepdim=k)),
    "argmin_reduce": (f32, lambda x, ax, k: torch.argmin(x, ax[0], keepdim=k)),
}


def _scatter_nd_torch(x: torch.Tensor, idx: torch.Tensor, upd: torch.Tensor) -> torch.Tensor:
    out = x.clone()
    out.index_put_((idx[:, 0], idx[:, 1]), upd, accumulate=True)
    return out


def _rnn_torch(xs: Sequence[np.ndarray], a: Mapping[str, Any]) -> list[torch.Tensor]:
    """rnn_scan's inputs are the projected inputs, gate blocks in ``GATE_ORDER``; torch's
    GRU given those blocks back in its own order, an identity input projection and zero
    input bias computes the same recurrence."""
    from t2n.ir.ops.rnn import GATE_ORDER

    hidden = int(a["hidden"])
    rows = np.concatenate([np.arange(hidden) + hidden * GATE_ORDER["gru"].index(j) for j in range(3)])
    xw, h0, w_hh, b_hh = T(xs[0][..., rows]), T(xs[1]), T(xs[2][rows]), T(xs[3][rows])
    gru = torch.nn.GRU(3 * hidden, hidden, bias=True)
    with torch.no_grad():
        gru.weight_ih_l0.copy_(torch.eye(3 * hidden))
        gru.bias_ih_l0.zero_()
        gru.weight_hh_l0.copy_(w_hh)
        gru.bias_hh_l0.copy_(b_hh)
        y, h = gru(xw, h0[None])
    return [y, h[0]]


def _cases() -> dict[str, Case]:
    cases: dict[str, Case] = {}
    for name, (gen, fn) in UNARY_TORCH.items():
        cases[name] = ((lambda g=gen: [g(3, 7)]), {}, _t(fn))
    for name, (gen, fn) in BINARY_TORCH.items():
        cases[name] = ((lambda g=gen: [g(3, 4), g(1, 4)]), {}, _t(fn))
    for name, (gen, fn) in REDUCE_TORCH.items():
        cases[name] = ((lambda g=gen: [g(3, 4, 5)]), {"axes": (1,), "keepdims": True},
                       (lambda xs, a, fn=fn: fn(T(xs[0]), list(a["axes"]), a["keepdims"])))
    cases["div_int"] = ((lambda: [i64(3, 4), i64(1, 4, lo=1, hi=4) * np.array([1, -1, 1, -1])]), {},
                        _t(lambda x, y: torch.div(x, y, rounding_mode="trunc")))
    cases["floor_div"] = ((lambda: [i64(3, 4), i64(1, 4, lo=1, hi=4) * np.array([1, -1, 1, -1])]), {},
                          _t(lambda x, y: torch.div(x, y, rounding_mode="floor")))
    cases["bitnot"] = ((lambda: [i64(3, 4)]), {}, _t(torch.bitwise_not))
    cases["not"] = ((lambda: [b(3, 4)]), {}, _t(torch.logical_not))
    cases["is_nan"] = ((lambda: [np.array([1.0, np.nan, np.inf], np.float32)]), {}, _t(torch.isnan))
    cases["is_inf"] = ((lambda: [np.array([1.0, np.nan, np.inf, -np.inf], np.float32)]),
                       {"detect_positive": False, "detect_negative": True}, _t(torch.isneginf))
    cases["select"] = ((lambda: [b(3, 4), f32(3, 4), f32(1, 4)]), {}, _t(torch.where))
    cases["gelu"] = ((lambda: [f32(3, 7)]), {"approximate": "tanh"},
                     _t(lambda x: F.gelu(x, approximate="tanh")))
    cases["gelu_erf"] = ((lambda: [f32(3, 7)]), {"approximate": "none"}, _t(F.gelu))
    cases["leaky_relu"] = ((lambda: [f32(3, 7)]), {"alpha": 0.2}, _t(lambda x: F.leaky_relu(x, 0.2)))
    cases["elu"] = ((lambda: [f32(3, 7)]), {"alpha": 1.6732632423543772, "scale": 1.0507009873554805},
                    _t(F.selu))
    cases["cast"] = ((lambda: [f32(3, 7, lo=-9, hi=9)]), {"to": DType.I32}, _t(lambda x: x.to(torch.int32)))
    cases["identity"] = ((lambda: [f32(2, 3)]), {}, _t(torch.clone))
    data = f32(2, 3)
    for name in ("const", "variable"):
        cases[name] = ((lambda: []), {"data": ArrayData(data, DType.F32)},
                       (lambda xs, a: torch.from_numpy(data)))
    cases["concat"] = ((lambda: [f32(2, 3), f32(2, 1)]), {"axis": 1}, _t(lambda x, y: torch.cat([x, y], 1)))
    cases["reshape"] = ((lambda: [f32(2, 6), np.array([3, -1], np.int64)]), {},
                        _t(lambda x, s: x.reshape(s.tolist())))
    cases["transpose"] = ((lambda: [f32(2, 3, 4)]), {"perm": (2, 0, 1)}, _t(lambda x: x.permute(2, 0, 1)))
    cases["squeeze"] = ((lambda: [f32(2, 1, 4)]), {"axes": (1,)}, _t(lambda x: x.squeeze(1)))
    cases["unsqueeze"] = ((lambda: [f32(2, 4)]), {"axes": (0, 2)},
                          _t(lambda x: x.unsqueeze(0).unsqueeze(2)))
    cases["expand"] = ((lambda: [f32(3, 1), np.array([2, -1, 4], np.int64)]), {},
                       _t(lambda x, s: x.expand(s.tolist())))
    cases["tile"] = ((lambda: [f32(2, 3), np.array([2, 3], np.int64)]), {},
                     _t(lambda x, r: x.repeat(r.tolist())))
    cases["shape_of"] = ((lambda: [f32(2, 3, 5)]), {}, _t(lambda x: torch.tensor(x.shape)))
    cases["slice"] = ((lambda: [f32(4, 9), np.array([-7], np.int64), np.array([8], np.int64)]),
                      {"axes": (1,), "steps": (3,)}, _t(lambda x, _b, _e: x[:, -7:8:3]))
    cases["pad"] = ((lambda: [f32(1, 2, 5)]), {"pads": ((0, 0), (0, 0), (2, 1)), "mode": "reflect", "value": 0.0},
                    _t(lambda x: F.pad(x, (2, 1), mode="reflect")))
    cases["gather"] = ((lambda: [f32(4, 3), np.array([[3, 0], [1, 1]], np.int64)]), {"axis": 0},
                       _t(lambda x, i: x[i]))
    cases["gather_elements"] = ((lambda: [f32(3, 4), i64(3, 2, lo=0, hi=4)]), {"axis": 1},
                                _t(lambda x, i: torch.gather(x, 1, i)))
    cases["scatter_elements"] = ((lambda: [f32(3, 4), i64(3, 2, lo=0, hi=4), f32(3, 2)]),
                                 {"axis": 1, "reduction": "add"},
                                 _t(lambda x, i, u: x.scatter_add(1, i, u)))
    cases["scatter_nd"] = ((lambda: [f32(3, 4), np.array([[0, 1], [2, 3], [0, 1]], np.int64), f32(3)]),
                           {"reduction": "add"}, _t(_scatter_nd_torch))
    cases["range"] = ((lambda: [np.array(2, np.int64), np.array(11, np.int64), np.array(3, np.int64)]), {},
                      _t(lambda s, e, st: torch.arange(int(s), int(e), int(st))))
    cases["reverse"] = ((lambda: [f32(3, 4)]), {"axes": (0, 1)}, _t(lambda x: torch.flip(x, (0, 1))))
    cases["matmul"] = ((lambda: [f32(2, 4, 3), f32(5, 4)]), {"transpose_a": True, "transpose_b": True},
                       _t(lambda x, y: x.transpose(-1, -2) @ y.T))
    cases["softmax"] = ((lambda: [f32(2, 3, 4)]), {"axes": (1,)}, _t(lambda x: torch.softmax(x, 1)))
    cases["log_softmax"] = ((lambda: [f32(2, 3, 4)]), {"axes": (2,)}, _t(lambda x: torch.log_softmax(x, 2)))
    cases["rms_norm"] = ((lambda: [f32(2, 3, 4)]), {"axes": (2,), "eps": 1e-5},
                         _t(lambda x: F.rms_norm(x, (4,), eps=1e-5)))
    cases["topk"] = ((lambda: [f32(3, 6)]), {"k": 2, "axis": 1, "largest": False},
                     (lambda xs, a: list(torch.topk(T(xs[0]), 2, 1, largest=False))))
    cases["rnn_scan"] = ((lambda: [f32(4, 2, 9), f32(2, 3), f32(9, 3), f32(9)]),
                         {"mode": "gru", "hidden": 3}, _rnn_torch)
    cases["cumsum_scan"] = ((lambda: [f32(3, 7, 2), np.zeros((3, 1, 2), np.float32)]), {"axis": 1},
                            (lambda xs, a: [torch.cumsum(T(xs[0]), 1)]))
    cases["apply_rope"] = ((lambda: [f32(1, 2, 3, 8), f32(1, 1, 3, 8), f32(1, 1, 3, 8)]), {},
                           _t(lambda x, cos, sin: x * cos + torch.cat([-x[..., 4:], x[..., :4]], -1) * sin))
    cases["cumsum"] = ((lambda: [f32(3, 7, 2)]), {"axis": 1}, (lambda xs, a: [torch.cumsum(T(xs[0]), 1)]))
    cases["gated_delta_rule"] = ((lambda: [f32(1, 5, 3, 8), f32(1, 5, 3, 8), f32(1, 5, 3, 6), -pos(1, 5, 3),
                                           pos(1, 5, 3) / 3, unit(1, 3, 8, 6)]), {"qk_l2norm": True}, _gdn_torch)
    cases["ssm_scan"] = ((lambda: [pos(2, 6, 4, 1) / 3, f32(2, 6, 4, 5), f32(2, 6, 1, 5), f32(2, 4, 5)]), {},
                         _ssm_torch)
    cases["max_pool_with_index"] = (
        (lambda: [f32(2, 3, 7, 8)]),
        {"kernel": (3, 2), "stride": (2, 2), "dilation": (2, 1), "padding": ((1, 2), (0, 1))},
        _t(lambda x: list(F.max_pool2d(x, (3, 2), 2, (1, 0), (2, 1), ceil_mode=True, return_indices=True))))
    cases["unpool_scatter"] = ((lambda: [np.zeros((2, 3, 36), np.float32), *_pooled(f32(2, 3, 6, 6))]),
                               {"lead": 2}, _t(lambda _, i, v: F.max_unpool2d(v, i, 2).reshape(2, 3, 36)))
    cases["fft"] = ((lambda: [f32(2, 6, 2)]), {"axis": 1, "inverse": True},
                    _t(lambda x: torch.view_as_real(torch.fft.ifft(torch.view_as_complex(x.contiguous()), dim=1) * 6)))
    cases["stft"] = ((lambda: [np.stack([f32(2, 40), np.zeros((2, 40), np.float32)], -1), pos(10)]),
                     {"axis": 1, "frame": 16, "stride": 4}, _stft_torch)
    return cases


def _stft_torch(xs: Sequence[np.ndarray], a: Mapping[str, Any]) -> torch.Tensor:
    """tract's framing: [B, frames, frame, 2], the window centred in the frame."""
    spec = torch.stft(T(xs[0][..., 0]), 16, 4, win_length=10, window=T(xs[1]), center=False,
                      onesided=False, return_complex=True)
    return torch.view_as_real(spec).transpose(1, 2)


def _gdn_torch(xs: Sequence[np.ndarray], a: Mapping[str, Any]) -> list[torch.Tensor]:
    """transformers' own per-token gated delta rule (Qwen3-Next's decode path)."""
    from transformers.models.qwen3_next.modeling_qwen3_next import torch_recurrent_gated_delta_rule

    q, k, v, g, beta, state = (T(x) for x in xs)
    out, last = torch_recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=state, output_final_state=True,
                                                 use_qk_l2norm_in_kernel=bool(a["qk_l2norm"]))
    return [out, last]


def _ssm_torch(xs: Sequence[np.ndarray], a: Mapping[str, Any]) -> list[torch.Tensor]:
    """The scan as a product of decays: h_t = (prod_{s<=t} a_s) h_0 + sum_s (prod_{s<r<=t} a_r) u_s."""
    decay, update, readout, h0 = (T(x).double() for x in xs)
    decay = decay.expand_as(update)
    steps = update.shape[1]
    ys, h = [], h0
    for t in range(steps):
        h = h0 * decay[:, :t + 1].prod(1) + sum(decay[:, s + 1:t + 1].prod(1) * update[:, s] for s in range(t + 1))
        ys.append((h * readout[:, t]).sum(-1))
    return [torch.stack(ys, 1).float(), h.float()]


def _pooled(x: np.ndarray) -> list[np.ndarray]:
    """Indices and values of a 2x2 max pool (the indices max_unpool takes)."""
    values, indices = F.max_pool2d(T(x), 2, return_indices=True)
    return [indices.numpy(), values.numpy()]


CASES = _cases()

NO_TORCH: dict[str, str] = {}
"""Ops with an evaluator but no PyTorch equivalent, and why (none today)."""


def _op_of(case: str) -> str:
    return {"div_int": "div", "gelu_erf": "gelu"}.get(case, case)


def test_every_evaluator_has_a_case() -> None:
    ops = OpSet.default()
    with_eval = {n for n in ops.names() if ops.get(n).evaluate is not None}
    covered = {_op_of(c) for c in CASES} | set(NO_TORCH)
    assert sorted(with_eval - covered) == [], "add a case (or a NO_TORCH reason) for these ops"
    assert sorted(covered - with_eval) == [], "cases for ops that have no evaluator"


@pytest.mark.parametrize("case", sorted(CASES))
def test_evaluator_matches_torch(case: str) -> None:
    gen, attrs, torch_fn = CASES[case]
    xs = gen()
    schema = OpSet.default().get(_op_of(case))
    assert schema.evaluate is not None
    got = schema.evaluate([x.copy() for x in xs], attrs)
    want = torch_fn(xs, attrs)
    wants = list(want) if isinstance(want, (list, tuple)) else [want]
    assert len(got) == len(wants)
    for g, w in zip(got, wants):
        w_np = w.numpy()
        assert g.shape == w_np.shape, (case, g.shape, w_np.shape)
        if w_np.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w_np.astype(g.dtype), err_msg=case)
            assert g.dtype.kind == w_np.dtype.kind or case == "shape_of", (case, g.dtype, w_np.dtype)
        else:
            np.testing.assert_allclose(g, w_np, rtol=2e-5, atol=2e-6, err_msg=case)
