"""What the ``export`` frontend is expected not to do, case by case, with the reason.

The layer, architecture and dynamic-axes suites (``tests/layers``, ``tests/architectures``,
``tests/dynamic``) run every case once per frontend (ids ``[...-jit]`` / ``[...-export]``,
set up in ``tests/conftest.py``). An export case listed in ``EXPORT_XFAIL`` is marked
``xfail(strict=True)``: when the frontend learns to do it, the case passes, the strict
mark turns that into a failure, and the entry must go. The table in ``docs/frontends.md``
is built from a run of these suites (``python -m tools.parity_table --write``).

Patterns are pytest node ids where ``*`` matches anything (brackets are literal); they
are matched against the export twins only, whose ids end in ``-export]`` or ``[export]``.
"""

from __future__ import annotations

import re

EXPORT_XFAIL: dict[str, str] = {
    # torch.export fixes a size the test asks to be dynamic (ExportSpecializationError)
    "tests/dynamic/test_dynamic_axes.py::test_conv_stack_over_time[export]":
        "torch.export specialises the length: its guard on a strided conv stack's output length",
    "tests/dynamic/test_dynamic_transformers.py::test_audio_length_is_dynamic_through_the_conv_feature_extractor"
    "[export]":
        "torch.export specialises the audio length: its guard on the conv feature extractor's output length",
    "tests/layers/test_attention.py::test_sdpa_dynamic_sequence[export]":
        "torch.export specialises the batch axis B (a size-1 example: torch.export fixes 1-size axes)",
    "tests/layers/test_pool_indices.py::test_segnet_like_over_dynamic_height_and_width[export]":
        "torch.export specialises H and W: two 2x2 pools and unpools guard them to multiples of 4",
    "tests/layers/test_conv_dynamic.py::test_ceil_mode_pooling_over_a_dynamic_length[*-export]":
        "torch.export specialises the length: ceil-mode pooling's output size guards it",
    "tests/layers/test_conv_dynamic.py::test_nearest_to_a_computed_size_stays_dynamic[export]":
        "torch.export specialises the length: upsampling to a size computed from it",
    "tests/layers/test_conv_dynamic.py::test_transposed_convolutions_over_dynamic_axes[axes1-*-export]":
        "torch.export specialises H and W: its guard on a strided transposed conv's output size",
    "tests/layers/test_rnn.py::test_recurrent_layer_over_a_dynamic_time_axis[*-export]":
        "torch.export specialises the time axis of nn.GRU/nn.LSTM (their unrolled loop)",
    # torch.export refuses the model (ExportFrontendError)
    "tests/layers/test_attention.py::test_transformer_layers[transformer-export]":
        "data-dependent Python: nn.Transformer's mask checks read tensor values",
    "tests/architectures/test_strided_models.py::test_longformer_*[export]":
        "data-dependent Python: Longformer's global-attention check (.item()) and index counts",
    "tests/architectures/test_strided_models.py::test_led_encoder_decoder[export]":
        "data-dependent Python: LED's global-attention check (.item()) and index counts",
    "tests/architectures/test_strided_models.py::test_encodec_*[export]":
        "data-dependent Python: EnCodec's padding is computed from tensor buffers (F.pad reads them as ints)",
    "tests/architectures/test_strided_models.py::test_mimi_*[export]":
        "data-dependent Python: Mimi's padding is computed from tensor buffers (F.pad reads them as ints)",
    "tests/layers/test_rnn.py::test_packed_sequences_are_refused[export]":
        "PackedSequence: torch.export cannot run pack_padded_sequence on symbolic tensors "
        "(ExportFrontendError, not the refusal the test expects of a trace)",
    # the test asserts the jit trace's fused ops, which torch.export decomposes
    "tests/layers/test_attention.py::test_multihead_attention[fast_*-export]":
        "the test asserts the trace's fused aten::_native_multi_head_attention; torch.export decomposes it",
    "tests/layers/test_attention.py::test_transformer_layers[layer_fast_*-export]":
        "the test asserts the trace's fused aten::_transformer_encoder_layer_fwd; torch.export decomposes it",
    "tests/layers/test_attention.py::test_transformer_layers[stack_no_mask-export]":
        "the test asserts the trace's fused aten::_transformer_encoder_layer_fwd; torch.export decomposes it",
    # wrong numbers in tract
    "tests/layers/test_attention.py::test_transformer_layers[stack_nested_tensor-export]":
        "wrong numbers in tract: nn.TransformerEncoder's nested-tensor path (padding mask) as decomposed",
}
"""Export cases that fail today → why. A fix shows up as XPASS, which fails the run."""

JIT_ONLY: dict[str, str] = {
    "tests/layers/test_rnn.py::test_older_tract_and_half_precision_keep_the_scan_in_standard_operations":
        "calls t2n.compile directly (asserts the tract form emitted for older tract and f16)",
    "tests/layers/test_rnn.py::test_tract_runs_a_gru_as_one_op_and_an_lstm_step_as_one_matmul_and_one_epilogue":
        "calls t2n.compile directly (asserts the tract form emitted for a recurrent layer)",
    "tests/dynamic/test_dynamic_axes.py::test_baked_size_is_reported_with_its_module":
        "calls t2n.compile directly (a jit trace's baked size)",
    "tests/dynamic/test_dynamic_axes.py::test_strictness_is_off_by_default_a_baked_size_warns_and_exports":
        "calls t2n.compile directly (a jit trace's baked size)",
    "tests/dynamic/test_dynamic_axes.py::test_strict_dynamic_axes_turns_a_baked_size_into_an_error":
        "calls t2n.compile directly (a jit trace's baked size)",
    "tests/dynamic/test_dynamic_axes.py::test_no_warning_when_sizes_follow":
        "calls t2n.compile directly",
    "tests/dynamic/test_dynamic_axes.py::test_invalid_dynamic_axes":
        "calls t2n.compile directly (argument checks, before any frontend)",
    "tests/dynamic/test_dynamic_axes.py::test_khronos_refuses_dynamic_axes":
        "calls t2n.compile directly (argument checks, before any frontend)",
    "tests/dynamic/test_dynamic_axes.py::test_target_and_compile_axes_merge_and_must_agree":
        "calls t2n.compile directly (argument checks, before any frontend)",
    "tests/layers/test_conv_dynamic.py::test_static_only_forms_are_reported_over_a_dynamic_axis":
        "calls t2n.compile directly (a jit trace's static-only forms)",
    "tests/dynamic/test_size_arithmetic_programs.py::test_a_size_turned_into_a_python_value_is_never_silent":
        "asserts the jit trace's warning on a Python value taken from a size (torch.export guards "
        "the size instead)",
    "tests/dynamic/test_size_arithmetic_programs.py::test_clamped_bounds_are_written_as_tract_reads_them":
        "calls t2n.compile directly (asserts the slice bounds written in graph.nnef)",
    "tests/dynamic/test_size_arithmetic_programs.py::test_expand_to_a_computed_size_is_a_broadcast_not_a_copy":
        "calls t2n.compile directly (a trace at S = 1 that torch.export would specialise)",
}
"""Test functions (``file::function``) that run with the jit frontend only, → why: they
call ``t2n.compile`` themselves instead of a ``t2n.testing`` helper, so an export twin
would repeat the jit case. (An export twin that compiles nothing through the helpers
fails and names this table.)"""

EXPORT_SLOW: dict[str, str] = {
}
"""Export cases left out of the default run besides the rule below (marked ``slow``;
``--t2n-export-all`` runs them, as the parity table does) → why.

The default run (CI) takes the first parameter set of every test function through the
export frontend, the rest only with ``--t2n-export-all``: torch.export and its core-ATen
decompositions cost about 0.8 s per compile where the jit trace of the same small model
costs 0.15 s, so all twins would more than double the suites' time."""


def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")) + r"\Z")


def match(table: dict[str, str], nodeid: str) -> str | None:
    """The reason of the first pattern of ``table`` that matches ``nodeid``, else None."""
    for pattern, reason in table.items():
        if _regex(pattern).match(nodeid):
            return reason
    return None
