"""Element-wise math, arithmetic, comparisons, logical/bitwise ops, clamping and NaN
tests, checked in tract and in the Khronos interpreter against PyTorch.

Ops are grouped into multi-output models to keep the engine runs few; a failure
names the output."""


import numpy as np
import pytest
import torch

from t2n.backends.tract.target import TractNNEF
from t2n.ir import OpSet
from t2n.testing import Lambda, check_export

NAN, INF = float("nan"), float("inf")


def r(*shape):
    return torch.randn(*shape)


def pos(*shape):
    return torch.rand(*shape) + 0.1


def unit(*shape):
    return torch.rand(*shape) * 1.8 - 0.9


def ints(*shape, lo=-9, hi=10):
    return torch.randint(lo, hi, shape)


HALVES = torch.tensor([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, -0.4, 0.6])


# -- unary -----------------------------------------------------------------------------

def unary_any(x):
    return (torch.exp(x), torch.exp2(x), torch.sin(x), torch.cos(x), torch.tan(x * 0.5),
            torch.atan(x), torch.arctan(x), torch.sinh(x), torch.cosh(x), torch.tanh(x),
            torch.asinh(x), torch.arcsinh(x), torch.erf(x), torch.erfc(x), torch.sigmoid(x),
            torch.sinc(x), torch.deg2rad(x), torch.rad2deg(x), torch.frac(x * 3),
            torch.trunc(x * 3), torch.fix(x * 3), torch.floor(x * 3), torch.ceil(x * 3),
            torch.abs(x), torch.absolute(x), torch.neg(x), torch.negative(x), -x, torch.positive(x),
            torch.sign(x), torch.sgn(x), torch.square(x), x.reciprocal(), torch.expm1(x))


def unary_positive(p):
    return (torch.log(p), torch.log1p(p), torch.log2(p), torch.log10(p), torch.sqrt(p),
            torch.rsqrt(p), torch.acosh(p + 1), torch.arccosh(p + 1))


def unary_unit(u):
    return (torch.asin(u), torch.acos(u), torch.atanh(u), torch.arcsin(u), torch.arccos(u),
            torch.arctanh(u), torch.logit((u + 1) / 2), torch.logit(u, eps=0.2))


CASES = {
    "unary_any": (unary_any, (torch.cat([r(20), torch.tensor([0.0, -0.0])]).reshape(2, 11),)),
    "unary_positive": (unary_positive, (pos(3, 4),)),
    "unary_unit": (unary_unit, (unit(3, 4),)),
    "round_half_even": (lambda x: (torch.round(x), x.round(), torch.round(x * 10, decimals=1),
                                   torch.round(x * 100, decimals=-1)), (HALVES,)),
    # expm1/log1p are exact near 0 (exp(x) - 1 loses ~5% at 1e-6): scaled to show it.
    "expm1_log1p_tiny": (lambda x: (torch.expm1(x) * 1e6, torch.log1p(x) * 1e6,
                                    torch.expm1(-x) * 1e6, torch.log1p(-x) * 1e6),
                         (torch.tensor([1e-6, 3e-6, 1e-5, 1e-7, 2e-4]),)),
    "expm1_log1p_wide": (lambda x: (torch.expm1(x), torch.log1p(x.abs())),
                         (torch.tensor([-100.0, -20.0, -0.7, -0.3, 0.0, 0.3, 0.7, 5.0, 40.0]),)),
    # PyTorch's sign of NaN is 0 (tract's and NNEF's is NaN).
    "sign_nan": (lambda x: (torch.sign(x), torch.sgn(x)), (torch.tensor([NAN, -2.0, 0.0, 3.0]),)),
    "int_promoted_to_float": (lambda i: (torch.exp(i), torch.sigmoid(i), torch.sqrt(i),
                                         torch.sin(i), torch.reciprocal(i), torch.erf(i),
                                         torch.exp2(i), torch.log1p(i)), (ints(2, 5),)),
    "inplace_unary": (lambda x: (x.clone().exp_(), x.clone().abs_(), x.clone().neg_(),
                                 x.clone().sigmoid_(), x.clone().floor_(), x.clone().round_(),
                                 x.clone().trunc_(), x.clone().sin_()), (r(3, 4),)),
    # -- arithmetic --
    "add_sub_alpha": (lambda a, b: (torch.add(a, b, alpha=2.5), torch.sub(a, b, alpha=-3),
                                    torch.rsub(a, b, alpha=2), torch.rsub(a, 5.0), 3 - a, a - 1.5,
                                    torch.subtract(a, b), a.clone().add_(b, alpha=0.5),
                                    a.clone().sub_(b[0], alpha=2)), (r(2, 3, 4), r(3, 1))),
    "mul_div_broadcast": (lambda a, b: (a * b, b * a, a / b, torch.true_divide(a, b), 2 / b,
                                        torch.divide(a, 4), a.clone().div_(b[0]), a.clone().mul_(3)),
                          (r(4, 1, 3), pos(5, 3))),
    "float_division_modes": (lambda a, b: (torch.div(a, b, rounding_mode="trunc"),
                                           torch.div(a, b, rounding_mode="floor"), a // b,
                                           torch.floor_divide(a, 0.7), a % b, torch.remainder(a, -0.6),
                                           torch.fmod(a, b), torch.fmod(a, -0.6), 5.5 % b,
                                           torch.remainder(-5.5, b)),
                             (r(3, 4) * 5, torch.where(torch.rand(3, 4) > 0.5, 1.0, -1.0) * pos(3, 4))),
    "pow_forms": (lambda x, p, e: (x ** 2, x ** 3, p ** 0.5, p ** -0.5, p ** -1, p ** 1.7, x ** 1,
                                   2 ** x, 2.5 ** x, torch.pow(p, e), torch.pow(x, 0),
                                   torch.float_power(p, 2), torch.float_power(p, e),
                                   x.clone().pow_(2)),
                  (r(3, 4), pos(3, 4), r(4))),
    "pow_int_exponent_scalar_promotes": (lambda i: (i ** 1.5, 2.0 ** i, torch.pow(i, 0.5)),
                                         (ints(6, lo=0, hi=5),)),
    "atan2_hypot": (lambda y, x: (torch.atan2(y, x), torch.arctan2(y, x), torch.hypot(y, x),
                                  torch.atan2(y, 2.0 * torch.ones(()))),
                    (torch.tensor([1.0, -1.0, 1.0, -1.0, 0.0, -0.0, 2.0, -2.0, 0.0, 0.5]),
                     torch.tensor([1.0, 1.0, -1.0, -1.0, -1.0, -1.0, 0.0, 0.0, 1.0, -3.0]))),
    "copysign": (lambda a, b: (torch.copysign(a, b), torch.copysign(a, -1.0), torch.copysign(a, 2),
                               torch.copysign(a, -0.0)),
                 (torch.tensor([1.0, -2.0, 3.0, -4.0, 0.5]), torch.tensor([-0.0, 0.0, -3.0, 2.0, INF]))),
    "xlogy": (lambda x, y: (torch.xlogy(x, y), torch.special.xlogy(x, y)),
              (torch.tensor([0.0, 0.0, 1.0, 2.0, 3.0]), torch.tensor([0.0, NAN, 2.0, 0.5, NAN]))),
    # maximum/minimum propagate NaN; fmax/fmin return the other operand.
    "nan_extrema": (lambda a, b: (torch.maximum(a, b), torch.minimum(a, b), torch.fmax(a, b),
                                  torch.fmin(a, b), torch.maximum(a, b[0])),
                    (torch.tensor([NAN, 1.0, NAN, 3.0, -1.0]), torch.tensor([1.0, NAN, NAN, 2.0, 0.0]))),
    "lerp_addc": (lambda a, b, w: (torch.lerp(a, b, 0.3), torch.lerp(a, b, 0.8), torch.lerp(a, b, w),
                                   torch.addcmul(a, b, w, value=-2.0), torch.addcmul(a, b, w),
                                   torch.addcdiv(a, b, w + 2, value=0.5), a.clone().lerp_(b, 0.5)),
                  (r(3, 4), r(3, 4), torch.rand(4) * 1.4 - 0.2)),
    "clamp": (lambda x, lo, hi: (torch.clamp(x, -0.5, 0.5), torch.clamp(x, min=0.1),
                                 torch.clamp(x, max=-0.1), x.clip(-1, 1), torch.clamp(x, lo, hi),
                                 torch.clamp(x, min=lo), x.clamp_min(0.2), x.clamp_max(lo),
                                 torch.clamp(x, 1.0, -1.0), x.clone().clamp_(-0.2, 0.3),
                                 x.clone().clamp_min_(0)),
              (r(3, 4), -pos(4), pos(3, 1))),
    "int_clamp_float_bounds_promotes": (lambda i: (torch.clamp(i, -2.5, 3.5), i.clamp(min=0.5)),
                                        (ints(2, 6),)),
    # -- comparisons and logic --
    "comparisons": (lambda a, b: (a < b, a <= b, a > b, a >= b, a == b, a != b, a < 0.5, a <= 0.1,
                                  torch.greater(a, b), torch.greater_equal(a, b), torch.less(a, b),
                                  torch.less_equal(a, b), torch.not_equal(a, b), torch.eq(a, a),
                                  a.clone().gt_(b)),
                    (torch.round(r(2, 3, 4)), torch.round(r(4)))),
    "int_float_comparison_promotes": (lambda i, x: (i < x, i == 2.0, i > 1.5, x >= i),
                                      (ints(3, 4, lo=-3, hi=3), torch.round(r(3, 4) * 2))),
    "bool_comparisons_and_logic": (lambda a, b: (a == b, a != b, a < b, a >= b, a & b, a | b, a ^ b,
                                                 ~a, torch.logical_not(a), torch.logical_and(a, b),
                                                 torch.logical_or(a, b), torch.logical_xor(a, b),
                                                 torch.bitwise_not(a), torch.bitwise_xor(a, b), a + b,
                                                 a * b, torch.maximum(a, b), torch.minimum(a, b)),
                                   (r(3, 4) > 0, r(4) > 0)),
    "logical_of_floats": (lambda x, y: (torch.logical_and(x, y), torch.logical_or(x, y * 0),
                                        torch.logical_not(x), torch.logical_xor(x, y), ~(x > 0)),
                          (torch.round(r(3, 4)), torch.round(r(3, 4)))),
    "iand_rebinds": (lambda a, b: _iand(a, b), (r(3, 4) > 0, r(3, 4) > 0)),
    # -- NaN and infinity --
    "nan_inf_tests": (lambda x: (torch.isnan(x), torch.isinf(x), torch.isfinite(x), torch.isposinf(x),
                                 torch.isneginf(x), torch.nan_to_num(x), torch.nan_to_num(x, nan=1.5),
                                 torch.nan_to_num(x, posinf=7.0, neginf=-8.0), x.clone().nan_to_num_()),
                      (torch.tensor([NAN, INF, -INF, 0.0, -2.5, 3e38, -3e38]),)),
}


def _iand(a, b):
    c = a.clone()
    c &= b
    c |= a
    return c, a ^ c


@pytest.mark.parametrize("name", sorted(CASES))
def test_float_and_logical(name):
    fn, args = CASES[name]
    check_export(Lambda(fn), args)


# -- integer arithmetic: tract only (standard NNEF computes on reals) ------------------

INT_CASES = {
    "int_keeps_dtype": (lambda i: (torch.abs(i), torch.neg(i), -i, torch.sign(i), torch.sgn(i),
                                   torch.square(i), torch.floor(i), torch.ceil(i), torch.round(i),
                                   torch.trunc(i), torch.positive(i), torch.relu(i), i.clone().abs_()),
                        "aten::abs"),
    "int_division_modes": (lambda i: (torch.div(i, 4, rounding_mode="trunc"),
                                      torch.div(i, -4, rounding_mode="floor"), i // 3, i // -3,
                                      i % 4, i % -4, torch.fmod(i, 4), torch.fmod(i, -4), i / 4,
                                      torch.remainder(i, 3), 7 // (i.abs() + 1), -7 % (i.abs() + 1)),
                           "aten::floor_divide"),
    "int_tensor_division": (lambda i: (i // torch.tensor([3, -3, 2, -2, 5, -5]), i % torch.tensor([3, -3, 2, -2, 5, -5]),
                                       torch.fmod(i, torch.tensor([3, -3, 2, -2, 5, -5]))),
                            "aten::remainder"),
    "int_pow_and_extrema": (lambda i: (i ** 2, i ** 3, 2 ** i.abs(), torch.pow(i, i.abs() % 3),
                                       torch.maximum(i, -i), torch.fmin(i, i // 2),
                                       torch.clamp(i, -3, 4), torch.clamp_min(i, 0)), "aten::pow"),
    "int_bitwise": (lambda i: (i & 6, i | 3, i ^ 5, ~i, torch.bitwise_and(i, -i),
                               torch.bitwise_or(i, i // 2), torch.bitwise_xor(i, 7),
                               torch.bitwise_not(i)), "aten::bitwise_and"),
    "int_comparisons": (lambda i: (i < 3, i == 2, i != -i, i >= i // 2, torch.isnan(i),
                                   torch.isinf(i), torch.isfinite(i)), "aten::lt"),
    "bool_square": (lambda i: (torch.square(i > 0), i * i), "aten::square"),
    "mixed_int_sizes": (lambda i: (i.to(torch.int32) * 3, i.to(torch.int32) + i,
                                   i.to(torch.int8).abs(), i.to(torch.int32) & 5), "aten::mul"),
}


@pytest.mark.parametrize("name", sorted(INT_CASES))
def test_integer(name):
    fn, refused_op = INT_CASES[name]
    i = torch.tensor([-7, 7, -8, 8, 0, 13])
    check_export(Lambda(fn), (i,), khronos_refuses=refused_op)


# -- half precision and older tract versions -------------------------------------------

def test_f16_in_tract():
    x = r(3, 8).half()
    p = pos(3, 8).half()
    fn = Lambda(lambda x, p: (torch.exp(x), torch.erf(x), torch.sigmoid(x), torch.tanh(x), torch.round(x * 3),
                          torch.trunc(x * 3), x * p, x / p, torch.maximum(x, p), torch.clamp(x, -0.5, 0.5),
                          torch.nan_to_num(x / 0), torch.isinf(x / 0), torch.sqrt(p), x ** 2, x < p,
                          torch.atan2(x, p), torch.expm1(x)))
    check_export(fn, (x, p), targets=["tract"])


def test_inplace_keeps_self_dtype():
    """``x_f16.mul_(y_f32)`` computes in f32 but writes f16."""
    x, y = r(3, 4).half(), r(3, 4)
    fn = Lambda(lambda x, y: (x.clone().mul_(y), x.clone().add_(y), x.clone().lt_(0.0), x.clone().div_(y)))
    check_export(fn, (x, y), targets=["tract"])


def test_is_inf_before_tract_0_23():
    """Without tract_core_is_inf the infinity test is spelled out from standard ops."""
    x = torch.tensor([NAN, INF, -INF, 0.0, -2.5, 3e38])
    fn = Lambda(lambda x: (torch.isinf(x), torch.isposinf(x), torch.isneginf(x), torch.nan_to_num(x)))
    res = check_export(fn, (x,), targets=[TractNNEF(version="0.22.0")])
    assert "tract_core_is_inf" not in res.artifacts["tract"].graph_nnef


# -- the IR's numpy evaluator agrees with PyTorch --------------------------------------

EVAL_UNARY = {
    "expm1": torch.expm1, "log1p": torch.log1p, "trunc": torch.trunc, "square": torch.square,
    "round": torch.round, "sign": torch.sign, "erf": torch.erf, "softplus": torch.nn.functional.softplus,
    "hard_swish": torch.nn.functional.hardswish, "silu": torch.nn.functional.silu,
}


@pytest.mark.parametrize("name", sorted(EVAL_UNARY))
def test_evaluator_matches_torch(name):
    x = np.concatenate([np.random.randn(50), [0.5, 1.5, -2.5, 1e-7]]).astype(np.float32)
    if name == "log1p":
        x = np.abs(x)
    got = OpSet.default().get(name).evaluate([x], {})[0]
    np.testing.assert_allclose(got, EVAL_UNARY[name](torch.from_numpy(x)).numpy(), rtol=2e-6, atol=1e-7)


def test_evaluator_binary_and_tests():
    ops = OpSet.default()
    y = np.array([1.0, -1.0, -0.0, 0.0, 2.0], np.float32)
    x = np.array([-1.0, -1.0, -1.0, 1.0, 0.0], np.float32)
    np.testing.assert_allclose(ops.get("atan2").evaluate([y, x], {})[0],
                               torch.atan2(torch.from_numpy(y), torch.from_numpy(x)).numpy(), rtol=1e-6)
    i, j = np.array([6, -7, 12]), np.array([3, 5, -4])
    assert ops.get("bitand").evaluate([i, j], {})[0].tolist() == (torch.tensor(i) & torch.tensor(j)).tolist()
    assert ops.get("bitnot").evaluate([i], {})[0].tolist() == (~torch.tensor(i)).tolist()
    v = np.array([np.nan, np.inf, -np.inf, 1.0], np.float32)
    assert ops.get("is_inf").evaluate([v], {"detect_positive": False})[0].tolist() == [False, False, True, False]
    assert ops.get("is_nan").evaluate([v], {})[0].tolist() == [True, False, False, False]
    e = ops.get("elu").evaluate([y], {"alpha": 2.0, "scale": 1.5, "input_scale": 0.5})[0]
    np.testing.assert_allclose(e, 1.5 * np.where(y > 0, y, 2.0 * np.expm1(0.5 * y)), rtol=1e-6)


def test_f64_and_bf16_in_tract():
    """f64 constants keep their digits (tract reads literals as f32); bf16 constants
    are bf16 bits, not the number cast to an integer."""
    x = torch.tensor([1.0, 2.0, -3.0, INF, NAN], dtype=torch.float64)
    fn = Lambda(lambda x: (x + 0.1, x * 1e300, torch.nan_to_num(x), torch.isinf(x), torch.isnan(x),
                       torch.maximum(x, x * 2), torch.sign(x), torch.float_power(x.abs(), 0.1)))
    check_export(fn, (x,), targets=["tract"], tolerance="exact")
    b = torch.tensor([1.0, 2.5, -3.0, 0.75], dtype=torch.bfloat16)
    fn = Lambda(lambda b: (b * 0.5, b + 1.5, torch.clamp(b, -1.0, 2.0), torch.nan_to_num(b), b ** 2))
    check_export(fn, (b,), targets=["tract"])


class Info(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.info = torch.nn.Parameter(torch.tensor([1.0, -2.0, 3.0]))

    def forward(self, x):
        return x * self.info, torch.isinf(x)


def test_identifiers_starting_with_inf():
    """tract reads an operand named ``info`` or ``inf_x`` as the literal inf."""
    check_export(Info(), (torch.tensor([INF, 0.5, -INF]),))


def test_erfinv_over_its_domain_and_folded_from_a_constant():
    """Giles' approximation, in tract, against PyTorch: the whole open interval, the
    ends (+-inf) and beyond (NaN); and a constant argument (gemma3n's sparsity threshold,
    ``Normal(0, 1).icdf(p)``) folds to a constant."""
    x = torch.cat([torch.linspace(-0.999999, 0.999999, 2001), torch.tensor([-1.0, 1.0, 0.0, 1.5, -1e-7])])
    check_export(Lambda(lambda v: torch.erfinv(v) + torch.special.erfinv(v * 0.5)), (x,))
    res = check_export(Lambda(lambda v: v * torch.distributions.Normal(0.0, 1.0).icdf(torch.tensor(0.95))), (x,))
    assert "log" not in res.artifacts["tract"].graph_nnef
