"""The artifact generates what transformers generates: greedy decoding in tract's Python
package (prefill, then one token at a time with the cache fed back) against
``generate(do_sample=False)``, token for token."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from t2n.llm import export_llm, tract_greedy_generate

from .tiny_models import reference_tokens, tiny_model

NEW_TOKENS = 16


def _prompt(length: int = 5) -> torch.Tensor:
    return torch.randint(1, 96, (1, length), generator=torch.Generator().manual_seed(3))


def _generates_identically(model: torch.nn.Module, out: Path, **options: object) -> None:
    export_llm(model, out, **options)  # type: ignore[arg-type]
    prompt = _prompt()
    assert tract_greedy_generate(out, prompt, NEW_TOKENS) == reference_tokens(model, prompt, NEW_TOKENS)


@pytest.mark.parametrize("family", ["llama", "qwen2", "gpt2"])
def test_family_generates_identically(family: str, tmp_path: Path) -> None:
    _generates_identically(tiny_model(family), tmp_path / "out")


@pytest.mark.parametrize("family", ["qwen3", "mistral", "phi3", "olmo", "gpt_neox", "gemma2", "gemma3"])
def test_more_families_generate_identically(family: str, tmp_path: Path) -> None:
    _generates_identically(tiny_model(family), tmp_path / "out")


def test_layout_modes_and_assertions(tmp_path: Path) -> None:
    import tarfile

    model = tiny_model("llama")
    path = export_llm(model, tmp_path / "out", verify=False)
    assert path == tmp_path / "out" / "model" / "model.nnef.tgz"
    modes = json.loads((tmp_path / "out" / "modes.json").read_text())
    assert modes["modes"]["tg"]["assert"] == "S == 1" and modes["modes"]["pp"]["assert"] == "P == 0"
    assert modes["inputs"][:3] == ["input_ids", "in_cache_key_0", "in_cache_value_0"]
    assert modes["outputs"][-1] == "out_cache_value_1"
    with tarfile.open(path) as tar:
        graph = tar.extractfile("graph.nnef").read().decode()  # type: ignore[union-attr]
    for line in ("tract_assert P >= 0;", "tract_assert S >= 1;", "tract_assert S + P < 128;",
                 "tract_assert tg: S == 1;", "tract_assert pp: P == 0;"):
        assert f"extension {line}" in graph
    assert "tract_assert P >= 1" not in graph  # an empty cache is allowed


def test_samples_replay_in_tract(tmp_path: Path) -> None:
    """tests/prefill.npz and tests/decode.npz hold inputs and PyTorch's outputs that
    tract reproduces."""
    import tract

    from t2n.backends.tract.child import numpy_of

    export_llm(tiny_model("qwen2"), tmp_path / "out", verify=False)
    runnable = tract.nnef().load(str(tmp_path / "out" / "model" / "model.nnef.tgz")).into_runnable()
    modes = json.loads((tmp_path / "out" / "modes.json").read_text())
    for sample, past in (("prefill", 0), ("decode", 4)):
        with np.load(tmp_path / "out" / "tests" / f"{sample}.npz") as data:
            assert data["in_cache_key_0"].shape[2] == past
            got = [numpy_of(tract, np, o) for o in runnable.run([data[n] for n in modes["inputs"]])]
            for name, value in zip(modes["outputs"], got):
                np.testing.assert_allclose(value, data[name], rtol=1e-4, atol=1e-4, err_msg=name)


@pytest.mark.parametrize("keep", [None, 0])
def test_last_logits_by_default(keep: int | None, tmp_path: Path) -> None:
    """By default only the last position's logits (what generating needs); every
    position's with 0 or None."""
    model = tiny_model("llama")
    export_llm(model, tmp_path / "default", verify=False)
    with np.load(tmp_path / "default" / "tests" / "prefill.npz") as data:
        assert data["outputs"].shape == (1, 1, 96)
    export_llm(model, tmp_path / "out", num_logits_to_keep=keep)
    with np.load(tmp_path / "out" / "tests" / "prefill.npz") as data:
        assert data["outputs"].shape == (1, 4, 96)
    prompt = _prompt()
    assert tract_greedy_generate(tmp_path / "out", prompt, 8) == reference_tokens(model, prompt, 8)


def test_f16_generates_identically(tmp_path: Path) -> None:
    model = tiny_model("llama").to(torch.float16)
    _generates_identically(model, tmp_path / "out", tract_check_io_tolerance="very")
    assert json.loads((tmp_path / "out" / "modes.json").read_text())["cache"]["dtype"] == "float16"


def test_sliding_window_beyond_its_window(tmp_path: Path) -> None:
    """A Mistral whose window (4) is shorter than the text generated keeps each token to
    its window in tract as in transformers."""
    import transformers as tf

    torch.manual_seed(0)
    config = tf.MistralConfig(vocab_size=96, hidden_size=64, intermediate_size=128, num_attention_heads=4,
                              num_key_value_heads=2, num_hidden_layers=2, max_position_embeddings=128,
                              sliding_window=4)
    _generates_identically(tf.MistralForCausalLM(config).eval(), tmp_path / "out")


def test_q4_0_compression_and_f32_forcing(tmp_path: Path) -> None:
    model = tiny_model("llama")
    export_llm(model, tmp_path / "out", compression="min_max_q4_0", force_f32_attention=True,
               force_f32_normalization=True, force_f32_linear_accumulator=True)
    prompt = _prompt()
    # The model object was quantized in place, so transformers runs the same weights.
    assert tract_greedy_generate(tmp_path / "out", prompt, NEW_TOKENS) == \
        reference_tokens(model, prompt, NEW_TOKENS)


@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_reified_sdpa_generates_identically(family: str, tmp_path: Path) -> None:
    import tarfile

    _generates_identically(tiny_model(family), tmp_path / "out", reify_sdpa_operator=True)
    with tarfile.open(tmp_path / "out" / "model" / "model.nnef.tgz") as tar:
        graph = tar.extractfile("graph.nnef").read().decode()  # type: ignore[union-attr]
    assert "tract_transformers_sdpa(" in graph
