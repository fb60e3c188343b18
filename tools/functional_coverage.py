"""What t2n does with each public function of ``torch.nn.functional``: exported,
refused (and why), or without a meaning in an inference graph (and why).

Every function listed as exported has a case in ``tests/frontend/test_functional_breadth.py``
that runs it in tract and in the Khronos interpreter; a test there also fails when
PyTorch adds a function that this module does not classify. The section is rendered
into ``docs/operators.md`` by :func:`tools.operator_table.functional_section`.
"""

from __future__ import annotations

import inspect

import torch

_LOSS = "a loss: training objective, not part of a model's inference"
_RANDOM = "random in every call (no deterministic inference meaning)"
_HELPER = "a helper of the torch.nn.functional module itself, not an operation"

NOT_FOR_INFERENCE: dict[str, str] = {
    **{name: _LOSS for name in (
        "binary_cross_entropy", "binary_cross_entropy_with_logits", "cosine_embedding_loss",
        "cross_entropy", "ctc_loss", "gaussian_nll_loss", "hinge_embedding_loss", "huber_loss",
        "kl_div", "l1_loss", "linear_cross_entropy", "margin_ranking_loss", "mse_loss",
        "multi_margin_loss", "multilabel_margin_loss", "multilabel_soft_margin_loss",
        "nll_loss", "poisson_nll_loss", "smooth_l1_loss", "soft_margin_loss",
        "triplet_margin_loss", "triplet_margin_with_distance_loss")},
    "gumbel_softmax": _RANDOM,
    "fractional_max_pool2d": _RANDOM + " (pass _random_samples to fix them: then refused, no rule)",
    "fractional_max_pool3d": _RANDOM,
    "fractional_max_pool2d_with_indices": _RANDOM,
    "fractional_max_pool3d_with_indices": _RANDOM,
    **{name: _HELPER for name in (
        "assert_int_or_pair", "boolean_dispatch", "handle_torch_function", "has_torch_function",
        "has_torch_function_unary", "has_torch_function_variadic")},
}
"""Functions with no meaning in an exported inference graph, and why."""

REFUSED: dict[str, str] = {
    **{name: "CUDA-only kernels (grouped / float8-scaled matrix products); no rule"
       for name in ("grouped_mm", "scaled_grouped_mm", "scaled_mm")},
}
"""Functions with an inference meaning that t2n refuses on every target, and why."""

KHRONOS_REFUSED: dict[str, str] = {
    "grid_sample": "Khronos: standard NNEF has no gather by computed coordinates",
    "one_hot": "Khronos: comparing integer indices has no standard form",
    **{name: "Khronos: refused where the indices are read (standard argmax_pool does not give "
             "PyTorch's plane index); values alone export" for name in (
        "max_pool1d_with_indices", "max_pool2d_with_indices", "max_pool3d_with_indices")},
    **{name: "Khronos: refused where the indices are read, except over one window (the whole "
             "plane); values alone export" for name in (
        "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices",
        "adaptive_max_pool3d_with_indices")},
    **{name: "Khronos: standard NNEF has no scatter to write values at their indices"
       for name in ("max_unpool1d", "max_unpool2d", "max_unpool3d")},
}
"""Functions exported for tract but refused for Khronos NNEF, and why."""


def public_functions() -> list[str]:
    """The public callables of ``torch.nn.functional`` (functions, not modules or types)."""
    module = torch.nn.functional
    names = []
    for name in dir(module):
        obj = getattr(module, name)
        if name.startswith("_") or inspect.ismodule(obj) or inspect.isclass(obj) or not callable(obj):
            continue
        if not str(getattr(obj, "__module__", None) or "torch").startswith("torch"):
            continue  # names imported from typing and the like
        names.append(name)
    return sorted(names)


def base_name(name: str) -> str:
    """In-place spellings (``relu_``) share the row of their function."""
    return name[:-1] if name.endswith("_") and name[:-1] in dir(torch.nn.functional) else name


def exported() -> list[str]:
    """Functions exported on at least tract (in-place spellings folded into their function)."""
    skip = NOT_FOR_INFERENCE.keys() | REFUSED.keys()
    return sorted({base_name(n) for n in public_functions() if base_name(n) not in skip})


def rows() -> list[tuple[str, str, str, str]]:
    """(function, tract mark, Khronos mark, note) per function, in-place spellings folded."""
    out = []
    for name in sorted({base_name(n) for n in public_functions()}):
        if name in NOT_FOR_INFERENCE:
            out.append((name, "—", "—", f"not for inference: {NOT_FOR_INFERENCE[name]}"))
        elif name in REFUSED:
            out.append((name, "✘", "✘", REFUSED[name]))
        elif name in KHRONOS_REFUSED:
            out.append((name, "✔", "✘", KHRONOS_REFUSED[name]))
        else:
            out.append((name, "✔", "✔", ""))
    return out


def section() -> str:
    lines = [
        "",
        "## torch.nn.functional",
        "",
        "Each public function of `torch.nn.functional` in the pinned PyTorch: ✔ exported "
        "(run in the engine by the tests), ✘ refused (why), — no meaning in an inference "
        "graph (why). In-place spellings (`relu_`) share their function's row.",
        "",
        "| function | tract | Khronos | notes |",
        "|---|---|---|---|",
    ]
    lines += [f"| `{name}` | {t} | {k} | {note} |" for name, t, k, note in rows()]
    return "\n".join(lines) + "\n"
