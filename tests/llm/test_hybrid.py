"""Hybrid decoders (Qwen3-Next, Mamba, Mamba-2, Falcon-H1, Jamba, Bamba, Granite-MoE-Hybrid,
Nemotron-H, Zamba, Zamba-2): each recurrent layer's conv
and recurrent states are cache inputs and outputs beside the keys and values, and a
greedy loop in tract (prefill from zero states, then one token at a time) generates
what ``transformers`` generates."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch

from t2n.cli.check import replay_io_npz
from t2n.errors import NotExpressibleError, UnsupportedArchitectureError
from t2n.llm import export_llm, tract_greedy_generate
from t2n.llm.common.generate import load_runnable

from .folders import save_checkpoint
from .tiny_hybrid import HYBRID_FAMILIES, tiny_hybrid, tiny_qwen3_next_128
from .tiny_models import reference_tokens

NEW_TOKENS = 16


def _prompt() -> torch.Tensor:
    return torch.randint(1, 96, (1, 5), generator=torch.Generator().manual_seed(3))


def _graph(path: Path) -> str:
    with tarfile.open(path) as tar:
        return tar.extractfile("graph.nnef").read().decode()  # type: ignore[union-attr]


@pytest.mark.parametrize("family", HYBRID_FAMILIES)
def test_hybrid_model_generates_identically(family: str, tmp_path: Path) -> None:
    model = tiny_hybrid(family)
    path = export_llm(model, tmp_path / "out")  # verified in tract at the traced sizes too
    modes = json.loads((tmp_path / "out" / "modes.json").read_text())
    states = modes["cache"]["recurrent_states"]
    assert states and {s["kind"] for s in states} == {"conv", "recurrent"}
    assert {s["input"] for s in states} <= set(modes["inputs"]) and {s["output"] for s in states} <= set(modes["outputs"])
    assert _graph(path).count("tract_core_scan(") == len(states) // 2  # one loop per recurrent layer
    prompt = _prompt()
    expected = reference_tokens(model, prompt, NEW_TOKENS)
    assert len(set(expected)) > 3  # the tiny model does not repeat one token
    assert tract_greedy_generate(tmp_path / "out", prompt, NEW_TOKENS) == expected


@pytest.mark.parametrize("family", HYBRID_FAMILIES)
def test_hybrid_folder_streams_in_f16(family: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """From a checkpoint folder that PyTorch never loads (``verify=False``), in f16."""
    import transformers

    model = tiny_hybrid(family)
    folder = save_checkpoint(model, tmp_path / "ckpt", tokenizer=False)

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the folder was loaded")

    monkeypatch.setattr(transformers.PreTrainedModel, "from_pretrained", classmethod(refuse))
    export_llm(folder, tmp_path / "out", dtype="f16", verify=False)
    monkeypatch.undo()
    modes = json.loads((tmp_path / "out" / "modes.json").read_text())
    empty = modes["cache"]["empty"]
    assert {e["dtype"] for n, e in empty.items() if "recurrent" in n} == {"float32"}  # states stay f32
    assert {e["dtype"] for n, e in empty.items() if "recurrent" not in n} == {"float16"}
    prompt = _prompt()
    assert tract_greedy_generate(tmp_path / "out", prompt, NEW_TOKENS) == \
        reference_tokens(model.half(), prompt, NEW_TOKENS)


def test_qwen3_next_f16_uses_tracts_gated_delta_net(tmp_path: Path) -> None:
    """f16 with heads of width 128: the loop body is tract's own
    ``tract_transformers_gdn_recurrent``; the samples are replayed step by step."""
    model = tiny_qwen3_next_128()
    folder = save_checkpoint(model, tmp_path / "ckpt", tokenizer=False)
    path = export_llm(folder, tmp_path / "out", dtype="f16", sample_generation_total_size=8)
    assert "tract_transformers_gdn_recurrent(" in _graph(path)
    reports = replay_io_npz(path, tmp_path / "out" / "tests" / "io.npz")
    assert [name for name, _ in reports] == ["prefill", "decode", "decode_2", "decode_3"]
    assert all(r.ok for _, r in reports)
    prompt = _prompt()
    assert tract_greedy_generate(tmp_path / "out", prompt, NEW_TOKENS) == \
        reference_tokens(model.half(), prompt, NEW_TOKENS)
    f32 = export_llm(model.float(), tmp_path / "f32")
    assert "tract_transformers_gdn_recurrent(" not in _graph(f32)  # f32: the body in standard operations


def test_mamba_has_no_past_and_asserts_both_modes(tmp_path: Path) -> None:
    """Without attention layers there is no ``P``: a prompt is a call of several tokens
    from zero states, a generated token a call of one."""
    path = export_llm(tiny_hybrid("mamba"), tmp_path / "out")
    text = _graph(path)
    assert "tract_assert pp: S >= 2" in text and "tract_assert tg: S == 1" in text and "P" not in \
        text.split("graph main")[0].replace("tract_core_properties", "")
    modes = json.loads((tmp_path / "out" / "modes.json").read_text())
    assert modes["inputs"] == ["input_ids", "in_cache_conv_0", "in_cache_recurrent_0", "in_cache_conv_1",
                               "in_cache_recurrent_1"]
    assert modes["cache"]["kv_layers"] == [] and set(modes["modes"]) == {"pp", "tg"}
    assert modes["cache"]["empty"]["in_cache_recurrent_0"] == {"shape": [1, 128, 8], "dtype": "float32"}
    runnable = load_runnable(path)
    assert runnable.input_count() == 5 and runnable.output_count() == 5
    reports = replay_io_npz(path, tmp_path / "out" / "tests" / "io.npz")
    assert all(r.ok for _, r in reports)


def test_hybrid_with_f32_interface(tmp_path: Path) -> None:
    """``force_inputs_dtype='f32'`` on an f16 hybrid: every cache tensor is f32 at the
    graph's edges, the conv states cast to f16 inside, the recurrent ones kept f32."""
    model = tiny_hybrid("jamba").half()
    # f32 outputs of f16 arithmetic: the f32 tolerance of `approximate` is too tight
    export_llm(model, tmp_path / "out", force_inputs_dtype="f32", tract_check_io_tolerance="very")
    modes = json.loads((tmp_path / "out" / "modes.json").read_text())
    assert {e["dtype"] for e in modes["cache"]["empty"].values()} == {"float32"}
    prompt = _prompt()
    assert tract_greedy_generate(tmp_path / "out", prompt, NEW_TOKENS) == reference_tokens(model, prompt, NEW_TOKENS)


def test_stateful_cache_refused_for_recurrent_states(tmp_path: Path) -> None:
    with pytest.raises(NotExpressibleError) as err:
        export_llm(tiny_hybrid("qwen3_next"), tmp_path / "out", kv_cache="stateful")
    assert "in_cache_conv_0" in str(err.value) and "kv_cache='explicit'" in str(err.value)
    assert not (tmp_path / "out").exists()


def test_unknown_recurrent_mixer_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hybrid whose recurrent layer t2n has no explicit-state form for (LFM2's short
    convolution, its mixer taken out of the table) is refused, naming the layer's module."""
    import transformers as tf

    from t2n.llm.decoder import recurrent_mixers

    monkeypatch.delitem(recurrent_mixers.MIXERS, "Lfm2ShortConv")

    torch.manual_seed(0)
    model = tf.Lfm2ForCausalLM(tf.Lfm2Config(
        vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=128, layer_types=["conv", "full_attention"])).eval()
    with pytest.raises(UnsupportedArchitectureError) as err:
        export_llm(model, tmp_path / "out")
    assert "Lfm2ShortConv" in str(err.value) and err.value.architecture == "Lfm2ShortConv"
    assert not (tmp_path / "out").exists()


def test_recurrent_ops_are_one_loop_at_any_length() -> None:
    """The two recurrences alone, exported with a symbolic token count, agree with
    PyTorch in tract at 1 and 6 tokens; the numpy evaluators agree too."""
    import t2n
    from t2n.ir.schema import OpSet
    from t2n.llm.decoder import recurrent_ops

    class Gdn(torch.nn.Module):
        def forward(self, *xs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return recurrent_ops.gated_delta_rule(*xs, True)  # type: ignore[no-any-return]

    class Ssm(torch.nn.Module):
        def forward(self, *xs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return recurrent_ops.ssm_scan(*xs)  # type: ignore[no-any-return]

    def gdn_inputs(t: int) -> tuple[torch.Tensor, ...]:
        g = torch.Generator().manual_seed(t)
        return (torch.randn(1, t, 3, 8, generator=g), torch.randn(1, t, 3, 8, generator=g),
                torch.randn(1, t, 3, 6, generator=g), -torch.rand(1, t, 3, generator=g),
                torch.rand(1, t, 3, generator=g), torch.randn(1, 3, 8, 6, generator=g))

    def ssm_inputs(t: int) -> tuple[torch.Tensor, ...]:
        g = torch.Generator().manual_seed(t)
        return (torch.rand(1, t, 4, 1, generator=g), torch.randn(1, t, 4, 7, generator=g),
                torch.randn(1, t, 1, 7, generator=g), torch.randn(1, 4, 7, generator=g))

    for module, make, kind, attrs in ((Gdn(), gdn_inputs, "gated_delta_rule", {"qk_l2norm": True}),
                                      (Ssm(), ssm_inputs, "ssm_scan", {})):
        names = [f"x{i}" for i in range(len(make(1)))]
        artifact = t2n.compile(module, make(3), input_names=names,
                               dynamic_axes={n: {1: "S"} for n in names[:-1]})
        assert [op.kind for op in artifact.ir.ops() if op.kind == kind] == [kind]
        for t in (1, 6):
            inputs = make(t)
            with torch.no_grad():
                expected = module(*inputs)
            assert artifact.check(inputs=[x.numpy() for x in inputs], expected=[e.numpy() for e in expected]).ok
            evaluated = OpSet.default().get(kind).evaluate([x.numpy() for x in inputs], attrs)  # type: ignore[misc]
            for got, want in zip(evaluated, expected):
                np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)


def test_recurrent_ops_refused_for_khronos() -> None:
    import t2n
    from t2n.llm.decoder import recurrent_ops

    class Ssm(torch.nn.Module):
        def forward(self, *xs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return recurrent_ops.ssm_scan(*xs)  # type: ignore[no-any-return]

    inputs = (torch.rand(1, 3, 4, 1), torch.randn(1, 3, 4, 7), torch.randn(1, 3, 1, 7), torch.randn(1, 4, 7))
    with pytest.raises(NotExpressibleError, match="no loop"):
        t2n.compile(Ssm(), inputs, t2n.KhronosNNEF())


def test_zamba2_alternating_shared_blocks_with_attention_adapters(tmp_path: Path) -> None:
    """Two shared attention blocks taking turns over three hybrid layers, each layer with
    its own adapters on the shared queries, keys and values."""
    model = tiny_hybrid("zamba2", use_shared_attention_adapter=True, num_mem_blocks=2, num_key_value_heads=4,
                        num_hidden_layers=6, layers_block_type=["mamba", "hybrid"] * 3)
    export_llm(model, tmp_path / "out")
    prompt = _prompt()
    assert tract_greedy_generate(tmp_path / "out", prompt, NEW_TOKENS) == reference_tokens(model, prompt, NEW_TOKENS)
