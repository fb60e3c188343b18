"""t2n.quantize on real models: each recipe on a small transformers Llama exported and
run in tract against the dequantized PyTorch model, tied embeddings written once,
weights that cannot be Q4_0 left in float, and every bad input refused by name with
nothing changed or written."""

from __future__ import annotations

import copy
import logging
import os
import struct
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers as tf

import t2n
from t2n.errors import InvalidArgumentError, NotExpressibleError
from t2n.quant import q4_0
from t2n.quant.model import SCALES_ATTR, quantize_weight_
from t2n.serialize.dat import read_dat

Q4_0_ITEM = (0xFFFFFFFF, 0x54523040)


def llama(tied: bool = False) -> tuple[torch.nn.Module, torch.Tensor]:
    cfg = tf.LlamaConfig(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         use_cache=False, tie_word_embeddings=tied)
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = tf.LlamaForCausalLM(cfg).eval()
    return model, torch.randint(0, 96, (1, 7), generator=torch.Generator().manual_seed(1))


def item_type(path: Path) -> tuple[int, int]:
    with open(path, "rb") as f:
        return struct.unpack_from("<II", f.read(128), 44)


def q4_0_files(folder: Path) -> set[str]:
    return {p.name for p in folder.glob("*.dat") if item_type(p) == Q4_0_ITEM}


@pytest.mark.parametrize("recipe", ["min_max_q4_0", "min_max_q4_0_with_embeddings",
                                    "min_max_q4_0_with_embeddings_99"])
def test_recipes_on_llama_run_in_tract(recipe: str, tmp_path: Path) -> None:
    model, ids = llama()
    before = model.model.layers[0].mlp.up_proj.weight.detach().clone()
    assert t2n.quantize(model, recipe) is model
    after = model.model.layers[0].mlp.up_proj.weight.detach()
    assert not torch.equal(before, after) and (after - before).abs().max() < 0.02
    art = t2n.compile(model, (ids,), t2n.TractNNEF())
    art.check()  # tract on the Q4_0 blocks vs PyTorch on the dequantized weights
    art.save(tmp_path / "m")
    found = q4_0_files(tmp_path / "m")
    assert "model.layers.1.mlp.down_proj.weight.dat" in found and "lm_head.weight.dat" in found
    assert ("model.embed_tokens.weight.dat" in found) == recipe.endswith(("embeddings", "_99"))
    assert not any("norm" in name for name in found)
    # the file holds exactly the model's (dequantized) values
    w = read_dat(tmp_path / "m" / "model.layers.0.mlp.up_proj.weight.dat")
    assert np.array_equal(w, after.numpy())


def test_tied_embeddings_are_quantized_and_written_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    model, ids = llama(tied=True)
    with caplog.at_level(logging.INFO, logger="t2n.quant"):
        t2n.quantize(model, "min_max_q4_0_with_embeddings")
    assert sum("embed_tokens" in r.message or "lm_head" in r.message for r in caplog.records) == 1
    assert model.lm_head.weight is model.model.embed_tokens.weight
    art = t2n.compile(model, (ids,), t2n.TractNNEF())
    art.check()
    art.save(tmp_path / "m")
    names = {p.name for p in (tmp_path / "m").glob("*.dat")}
    assert "model.embed_tokens.weight.dat" in q4_0_files(tmp_path / "m")
    assert "lm_head.weight.dat" not in names


class Odd(torch.nn.Module):
    """A Linear whose rows (48 values) do not split into blocks of 32, one that does,
    and a weight read by something else than a linear layer."""

    def __init__(self) -> None:
        super().__init__()
        self.odd = torch.nn.Linear(48, 64)
        self.fine = torch.nn.Linear(64, 32)
        self.other = torch.nn.Linear(32, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fine(self.odd(x))
        return y + y @ self.other.weight  # the weight read untransposed: no Q4_0 in tract


def test_odd_shapes_stay_float_with_a_log_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    torch.manual_seed(0)
    model = Odd().eval()
    odd_before = model.odd.weight.detach().clone()
    with caplog.at_level(logging.INFO, logger="t2n"):
        t2n.quantize(model, "min_max_q4_0")
        art = t2n.compile(model, (torch.randn(3, 48),), t2n.TractNNEF())
        art.check()
        art.save(tmp_path / "m")
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "odd.weight stays in float" in text and "blocks of 32" in text
    assert "'other.weight' is written in float" in text and "matmul" in text
    assert torch.equal(model.odd.weight, odd_before)
    assert q4_0_files(tmp_path / "m") == {"fine.weight.dat"}


def test_explicit_tensors_that_cannot_be_q4_0_are_refused_and_nothing_changes() -> None:
    torch.manual_seed(0)
    model = Odd()
    state = copy.deepcopy(model.state_dict())
    cases = [(["fine.weight", "fine.bias"], r"'fine\.bias'.*rank 1"),
             (["odd.weight"], r"'odd\.weight'.*48 values.*blocks of 32"),
             (["fine.wieght"], r"no parameter 'fine\.wieght'"),
             ("fine.weight", "list of parameter names")]
    for names, message in cases:
        with pytest.raises(InvalidArgumentError, match=message):
            t2n.quantize(model, "min_max_q4_0", tensors=names)
    for recipe in ("q4_0", "min_max_q8_0", None):
        with pytest.raises(InvalidArgumentError, match=r"unknown quantization recipe.*min_max_q4_0"):
            t2n.quantize(model, recipe)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="percentile"):
        t2n.Q40Recipe("mine", percentile=0.2)
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())
    assert not any(hasattr(m, SCALES_ATTR) for m in model.modules())
    t2n.quantize(model, t2n.Q40Recipe("mine", percentile=0.9), tensors=["odd.bias", "fine.weight"][1:])
    assert not torch.equal(state["fine.weight"], model.fine.weight)
    assert torch.equal(state["other.weight"], model.other.weight)


def test_khronos_refuses_q4_0_weights_by_name_and_writes_nothing(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = t2n.quantize(Odd().eval(), "min_max_q4_0")
    out = tmp_path / "m.nnef.tgz"
    with pytest.raises(NotExpressibleError, match=r"'fine\.weight' is Q4_0.*TractNNEF"):
        t2n.export(model, (torch.randn(3, 48),), out, t2n.KhronosNNEF())
    assert os.listdir(tmp_path) == []


def test_weights_changed_after_quantize_are_refused_and_nothing_is_written(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = t2n.quantize(Odd().eval(), "min_max_q4_0")
    with torch.no_grad():
        model.fine.weight[3, 5] += 1e-3
    with pytest.raises(InvalidArgumentError, match=r"'fine\.weight'.*changed after t2n\.quantize"):
        t2n.export(model, (torch.randn(3, 48),), tmp_path / "m.nnef.tar")
    assert os.listdir(tmp_path) == []


def test_the_model_stays_a_torch_module(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = t2n.quantize(Odd().eval(), "min_max_q4_0")
    twin = copy.deepcopy(model)
    assert torch.equal(twin.fine.weight, model.fine.weight)
    twin.load_state_dict(model.state_dict())
    half = copy.deepcopy(model).half()
    x = torch.randn(3, 48)
    art = t2n.compile(half, (x.half(),), t2n.TractNNEF())
    art.check()
    art.save(tmp_path / "h")
    assert q4_0_files(tmp_path / "h") == {"fine.weight.dat"}


def test_export_tensors_writes_q4_0_tensors(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = t2n.quantize(Odd(), "min_max_q4_0")
    written = t2n.export_tensors_to_nnef(t2n.quantized_state(model), tmp_path / "t")
    assert q4_0_files(tmp_path / "t") == {"fine.weight.dat", "other.weight.dat"}
    assert np.array_equal(written["fine.weight"].read(), model.fine.weight.detach().numpy())
    assert np.array_equal(written["odd.weight"].read(), model.odd.weight.detach().numpy())
    w = torch.randn(4, 64)
    one = t2n.export_tensors_to_nnef({"w": t2n.quantize_tensor(w, name="w")}, tmp_path / "one")
    assert item_type(one["w"].path) == Q4_0_ITEM
    assert (torch.from_numpy(one["w"].read()) - w).abs().max() <= w.abs().max() / 16 + 1e-6  # half a step
    for bad, message in [(torch.randn(64), r"'b'.*rank 1"), (torch.randn(2, 40), r"'b'.*blocks of 32"),
                         (torch.ones(2, 32, dtype=torch.int64), r"'b'.*torch.int64")]:
        with pytest.raises(InvalidArgumentError, match=message):
            t2n.quantize_tensor(bad, name="b")
    assert not (tmp_path / "b").exists()


def test_percentile_calibration_clamps_the_outlier() -> None:
    block = torch.linspace(-1, 1, 32).reshape(1, 32)
    block[0, 7] = -10.0  # an outlier
    mm, p99 = block.clone(), block.clone()
    s_mm = quantize_weight_(mm, 1.0)
    s_99 = quantize_weight_(p99, 0.99)
    assert s_mm[0] == np.float16(10.0 / 8)  # GGML: the largest magnitude is code 0 exactly
    mags = np.sort(np.abs(block.numpy()[0]))
    expected = -(mags[30] + 0.69 * (mags[31] - mags[30])) / -8  # 0.99 quantile, signed like the outlier
    assert s_99[0] == np.float16(expected)
    assert p99[0, 7] == -8 * float(s_99[0])  # clamped to code 0
    assert (p99 - block).abs().max() < (mm - block).abs().max() + 8  # and bounded
    assert (p99 - block)[0, torch.arange(32) != 7].abs().max() < (mm - block).abs().max()
    codes = q4_0.codes_for(p99.numpy().reshape(1, 32), s_99)
    assert np.array_equal(q4_0.dequantize_codes(codes, s_99).reshape(1, 32), p99.numpy())


def test_export_writes_the_same_artifact_as_compile_then_save(tmp_path: Path) -> None:
    model, ids = llama(tied=True)
    t2n.quantize(model, "min_max_q4_0_with_embeddings")
    art = t2n.export(model, (ids,), tmp_path / "a.nnef.tar")
    overlap = art.stats["overlap"]  # the Q4_0 weights written while compiling were kept
    assert overlap["written_early"] == overlap["kept"] > 0, overlap
    t2n.compile(model, (ids,), t2n.TractNNEF()).save(tmp_path / "b.nnef.tar")
    assert (tmp_path / "a.nnef.tar").read_bytes() == (tmp_path / "b.nnef.tar").read_bytes()


def test_bf16_models_keep_their_q4_0_weights(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(50, 64), torch.nn.Linear(64, 32)).eval()
    t2n.quantize(model, "min_max_q4_0_with_embeddings")
    model = model.to(torch.bfloat16)  # written as f16 by default, the weights as Q4_0 blocks
    art = t2n.compile(model, (torch.randint(0, 50, (1, 5)),), t2n.TractNNEF())
    art.check("very_loose")  # PyTorch computes in bf16, tract in f16
    art.save(tmp_path / "m")
    assert q4_0_files(tmp_path / "m") == {"0.weight.dat", "1.weight.dat"}


def test_q4_0_weights_changed_after_compile_are_refused_at_save(tmp_path: Path) -> None:
    from t2n.errors import WeightsChangedError

    torch.manual_seed(0)
    model = t2n.quantize(Odd().eval(), "min_max_q4_0")
    art = t2n.compile(model, (torch.randn(3, 48),), t2n.TractNNEF())
    with torch.no_grad():
        model.fine.weight.mul_(-1)  # still Q4_0 values of other scales, but not the compiled ones
    with pytest.raises(WeightsChangedError, match=r"fine\.weight"):
        art.save(tmp_path / "m.nnef.tar")
    assert os.listdir(tmp_path) == []
