"""``LLMExportOptions``: every option of an LLM export (text, multimodal), made once (by
``export_llm`` from its keywords, by ``t2n llm`` from its flags), checked once by
``export_with_options`` and carried as one frozen object through the text and multimodal
paths: no option dicts, no keywords re-read downstream."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from t2n.errors import InvalidArgumentError, OverwriteRefusedError

if TYPE_CHECKING:
    import torch

    from t2n.backends.tract.target import TractNNEF
    from t2n.check.compare import Tolerance
    from t2n.llm.common.stateful import LLMForms

DTYPES = ("f32", "f16", "bf16")
"""``dtype=`` names (bf16 is written as f16: tract computes it so)."""

COMPRESSIONS = ("min_max_q4_0", "min_max_q4_0_with_embeddings", "min_max_q4_0_with_embeddings_99")
"""``compression=`` recipes (:func:`t2n.quantize`)."""


@attrs.frozen(kw_only=True)
class LLMExportOptions:
    """What an LLM export writes and checks; :meth:`check` refuses a bad value, naming it,
    before anything is written. See :func:`t2n.llm.export_llm` for each field."""

    dtype: str | None = None
    """``"f32"``, ``"f16"``, ``"bf16"`` (written as f16); None keeps the checkpoint's."""
    compression: str | None = None
    """A Q4_0 recipe of :data:`COMPRESSIONS`, or None."""
    force_f32_attention: bool = False
    force_f32_linear_accumulator: bool = False
    force_f32_normalization: bool = False
    num_logits_to_keep: int | None = 1
    """Logits of the last N positions; 0 or None: every position's."""
    tract_version: str | None = None
    verify: bool = True
    """Run the artifact in tract against transformers' own model (``t2n.reference``)."""
    tract_check_io_tolerance: str | None = None
    dump_with_tokenizer_and_conf: bool = False
    trust_remote_code: bool = False
    naming_scheme: str = "natural_verbose"
    reify_sdpa_operator: bool = False
    kv_cache: str = "explicit"
    """``"explicit"``, ``"stateful"``, ``"stateful_int8"``, ``"stateful_int4"``."""
    reify_rope: bool = False
    reify_rms_norm: bool = False
    overwrite: bool = False
    merge_peft: str | os.PathLike[str] | None = None
    force_inputs_dtype: str | None = None
    sample_generation_total_size: int | None = None
    window_kv_cache: bool = False
    image_sizes: Sequence[tuple[int, int]] | None = None
    copy_tied_weights: bool = True
    """An output projection tied to the embedding (any product sharing a weight over 4 MiB
    with other readers) reads a transposed copy, packed once by tract instead of at every
    call (``TractNNEF.copy_shared_product_weights``); False: the artifact is smaller by the
    copy and each token slower."""

    def check(self, out: Path) -> None:
        """Every field checked (and the destination ``out``), before anything is written."""
        from t2n.backends.nnef.naming import check_naming_scheme
        from t2n.llm.common.io_dtype import check_inputs_dtype
        from t2n.llm.common.samples import check_total_size
        from t2n.llm.common.stateful import check_llm_forms

        check_naming_scheme(self.naming_scheme)
        self._check_values(out)
        check_inputs_dtype(self.force_inputs_dtype)
        check_total_size(self.sample_generation_total_size)
        check_llm_forms(self.kv_cache, self.tract_version, reify_rope=self.reify_rope,
                        reify_rms_norm=self.reify_rms_norm, window_kv_cache=self.window_kv_cache)

    def _check_values(self, out: Path) -> None:
        if self.dtype is not None and self.dtype not in DTYPES:
            raise InvalidArgumentError(f"dtype must be one of {', '.join(DTYPES)} (or None: the "
                                       f"checkpoint's own), got {self.dtype!r}")
        if self.compression is not None and self.compression not in COMPRESSIONS:
            raise InvalidArgumentError(f"compression must be one of {', '.join(COMPRESSIONS)} or None, "
                                       f"got {self.compression!r}")
        keep = self.num_logits_to_keep
        if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 0):
            raise InvalidArgumentError(f"num_logits_to_keep must be a positive int (0 or None: every "
                                       f"position), got {keep!r}")
        if out.exists() and not self.overwrite and (not out.is_dir() or any(out.iterdir())):
            raise OverwriteRefusedError(f"{out} already exists and is not an empty folder; "
                                        "choose a new export_dirpath or pass overwrite=True")

    @property
    def kept_logits(self) -> int | None:
        """``num_logits_to_keep`` with 0 as None (every position)."""
        return self.num_logits_to_keep or None

    def torch_dtype(self) -> torch.dtype | None:
        """The module dtype ``dtype`` names (None: the checkpoint's)."""
        import torch

        return {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}.get(self.dtype or "")

    def forms(self) -> LLMForms:
        """tract's own forms asked for (:class:`t2n.llm.common.stateful.LLMForms`)."""
        from t2n.llm.common.stateful import LLMForms

        return LLMForms.of(self.kv_cache, self.reify_rope, self.reify_rms_norm, self.window_kv_cache)

    def target(self) -> TractNNEF:
        """The tract target: the version asked for, the f32 forcing, tract's attention op
        (also for a window cache, whose attention is tract's), the check tolerance."""
        from t2n.backends.tract.target import TRACT_LATEST, TractNNEF

        target = TractNNEF(self.tract_version or TRACT_LATEST, force_attention_inner_in_f32=self.force_f32_attention,
                           force_linear_accumulation_in_f32=self.force_f32_linear_accumulator,
                           force_norm_in_f32=self.force_f32_normalization,
                           reify_sdpa_operator=self.reify_sdpa_operator or self.window_kv_cache,
                           copy_shared_product_weights=self.copy_tied_weights)
        if self.tract_check_io_tolerance is None:
            return target
        return attrs.evolve(target, check_io_tolerance=self.tract_check_io_tolerance)

    def tolerance(self) -> Tolerance | str:
        """The tolerance of the check against transformers: the one asked for, else ``very``
        for a quantized cache, else the target's."""
        return self.tract_check_io_tolerance or ("very" if self.forms().kv_bits else self.target().check_io_tolerance)
