"""tract's KV-cache forms: the quantized cache (``kv_cache='stateful_int8'`` /
``'stateful_int4'``) and the sliding-window cache (``window_kv_cache=True``), each
checked by a greedy generation in tract identical to ``transformers``'."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
import torch

from t2n.errors import InvalidArgumentError, NotExpressibleError
from t2n.llm import export_llm, tract_greedy_generate

from .tiny_hybrid import tiny_windowed
from .tiny_models import reference_tokens, tiny_model


def _prompt() -> torch.Tensor:
    return torch.randint(1, 96, (1, 5), generator=torch.Generator().manual_seed(3))


def _graph(path: Path) -> str:
    with tarfile.open(path) as tar:
        return tar.extractfile("graph.nnef").read().decode()  # type: ignore[union-attr]


@pytest.mark.parametrize("kv_cache", ["stateful_int8", "stateful_int4"])
def test_quantized_cache_generates_identically(kv_cache: str, tmp_path: Path) -> None:
    """48 new tokens: past the first block of 32 keys tract quantizes (after 4 exact ones)."""
    model = tiny_model("llama")
    path = export_llm(model, tmp_path / "out", kv_cache=kv_cache)  # a prefill and a decode step checked too
    text = _graph(path)
    bits = kv_cache[-1]
    assert text.count("tract_transformers_quantized_dyn_kv_cache(") == 4 and "tract_transformers_dyn_kv_cache(" not in text
    assert text.count(f"bits = {bits}, per_channel = 1") == 2 and text.count(f"bits = {bits}, per_channel = 0") == 2
    modes = json.loads((tmp_path / "out" / "modes.json").read_text())
    assert modes["cache"]["quantized_bits"] == int(bits)
    prompt = _prompt()
    assert tract_greedy_generate(tmp_path / "out", prompt, 48) == reference_tokens(model, prompt, 48)


@pytest.mark.parametrize(("family", "kv_cache", "windows", "states"), [
    ("gemma3", "stateful", 1, ["cache_key_1", "cache_value_1"]),
    ("gemma3", "stateful_int8", 1, ["cache_key_1", "cache_value_1"]),
    ("mistral", "stateful", 2, ["cache_position"]),
])
def test_window_cache_generates_identically(family: str, kv_cache: str, windows: int, states: list[str],
                                            tmp_path: Path) -> None:
    """Windows of 4 tokens, 16 tokens generated after a 5-token prompt fed one token per
    call; the samples are checked that way too (``verify``)."""
    model = tiny_windowed(family)
    path = export_llm(model, tmp_path / "out", kv_cache=kv_cache, window_kv_cache=True)
    text = _graph(path)
    assert text.count("tract_transformers_window_kv_sdpa(") == windows and "window = 4" in text
    assert "tract_transformers_sdpa(" not in text or windows == 1  # the global layer keeps its attention
    modes = json.loads((tmp_path / "out" / "modes.json").read_text())
    assert modes["cache"]["tokens_per_call"] == 1 and modes["cache"]["states"] == states
    assert set(modes["cache"]["windows"]) == ({"0"} if windows == 1 else {"0", "1"})
    prompt = _prompt()
    assert tract_greedy_generate(tmp_path / "out", prompt, 16) == reference_tokens(model, prompt, 16)


@pytest.mark.parametrize(("model", "options"), [
    ("llama", {"kv_cache": "stateful_int8"}),
    ("gemma3", {"kv_cache": "stateful", "window_kv_cache": True}),
])
def test_kv_cache_forms_in_f16(model: str, options: dict[str, object], tmp_path: Path) -> None:
    half = (tiny_model(model) if model == "llama" else tiny_windowed(model)).half()
    export_llm(half, tmp_path / "out", **options)  # type: ignore[arg-type]
    prompt = _prompt()
    assert tract_greedy_generate(tmp_path / "out", prompt, 16) == reference_tokens(half, prompt, 16)


@pytest.mark.parametrize(("options", "error", "named"), [
    ({"kv_cache": "stateful_int8", "tract_version": "0.23.3"}, NotExpressibleError,
     "tract_transformers_quantized_dyn_kv_cache"),
    ({"kv_cache": "stateful", "window_kv_cache": True, "tract_version": "0.23.0"}, NotExpressibleError,
     "tract_transformers_window_kv_sdpa"),
    ({"window_kv_cache": True}, InvalidArgumentError, "stateful kv_cache"),
    ({"kv_cache": "stateful", "window_kv_cache": "yes"}, InvalidArgumentError, "window_kv_cache"),
])
def test_bad_forms_refused_before_writing(options: dict[str, object], error: type[Exception], named: str,
                                          tmp_path: Path) -> None:
    with pytest.raises(error, match=named):
        export_llm(tiny_windowed("mistral"), tmp_path / "out", **options)  # type: ignore[arg-type]
    assert not (tmp_path / "out").exists()


def test_window_cache_refused_without_windows(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="no sliding-window"):
        export_llm(tiny_model("llama"), tmp_path / "out", kv_cache="stateful", window_kv_cache=True)
    assert not (tmp_path / "out").exists()


@pytest.mark.slow  # a child process
def test_cli_quantized_window_cache(tmp_path: Path) -> None:
    from cli.cli_support import make_runner

    from .folders import save_checkpoint

    model = tiny_windowed("mistral")
    folder = save_checkpoint(model, tmp_path / "ckpt")
    out = tmp_path / "out"
    done = make_runner()("llm", "--local-dir", str(folder), "--export-dirpath", str(out), "--kv-cache",
                         "stateful_int4", "--window-kv-cache", "--num-logits-to-keep", "1")
    assert done.returncode == 0, done.stderr
    assert "tract_transformers_window_kv_sdpa(" in _graph(out / "model" / "model.nnef.tgz")
    prompt = _prompt()
    assert tract_greedy_generate(out, prompt, 16) == reference_tokens(model, prompt, 16)
