"""tract's stateful KV cache (``kv_cache="stateful"``): the graph takes only
``input_ids``, tract keeps the cache in its state, and a greedy loop in one state
generates what ``transformers`` generates."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch

from t2n.errors import InvalidArgumentError, NotExpressibleError
from t2n.llm import export_llm, tract_greedy_generate
from t2n.llm.common.generate import load_runnable
from t2n.llm.common.stateful import StatefulKVCache, run_steps

from .tiny_models import reference_tokens, tiny_model

NEW_TOKENS = 16


def _prompt() -> torch.Tensor:
    return torch.randint(1, 96, (1, 5), generator=torch.Generator().manual_seed(3))


def _graph(path: Path) -> str:
    with tarfile.open(path) as tar:
        return tar.extractfile("graph.nnef").read().decode()  # type: ignore[union-attr]


@pytest.mark.parametrize("family", ["llama", "qwen2", "gpt2"])
def test_stateful_cache_generates_identically(family: str, tmp_path: Path) -> None:
    model = tiny_model(family)
    path = export_llm(model, tmp_path / "out", kv_cache="stateful")  # verified in tract too
    runnable = load_runnable(path)
    assert runnable.input_count() == 1 and runnable.output_count() == 1
    assert _graph(path).count("tract_transformers_dyn_kv_cache(") == 4  # 2 layers x (key, value)
    prompt = _prompt()
    assert tract_greedy_generate(tmp_path / "out", prompt, NEW_TOKENS) == reference_tokens(model, prompt, NEW_TOKENS)


def test_modes_and_samples_describe_the_stateful_form(tmp_path: Path) -> None:
    export_llm(tiny_model("llama"), tmp_path / "out", kv_cache="stateful", verify=False)
    modes = json.loads((tmp_path / "out" / "modes.json").read_text())
    assert modes["inputs"] == ["input_ids"] and modes["outputs"] == ["outputs"]
    assert modes["cache"]["form"] == "stateful"
    assert modes["cache"]["states"][:2] == ["cache_key_0", "cache_value_0"]
    prefill = np.load(tmp_path / "out" / "tests" / "prefill.npz")
    decode = np.load(tmp_path / "out" / "tests" / "decode.npz")
    assert sorted(prefill.files) == ["input_ids", "outputs"] and decode["input_ids"].shape == (1, 1)
    got = run_steps(str(tmp_path / "out" / "model" / "model.nnef.tgz"), [[prefill["input_ids"]], [decode["input_ids"]]])
    np.testing.assert_allclose(got[0], prefill["outputs"], atol=1e-4, rtol=5e-4)
    np.testing.assert_allclose(got[1], decode["outputs"], atol=1e-4, rtol=5e-4)


def test_old_tract_is_refused_before_writing(tmp_path: Path) -> None:
    with pytest.raises(NotExpressibleError) as err:
        export_llm(tiny_model("llama"), tmp_path / "out", kv_cache="stateful", tract_version="0.22.4")
    text = str(err.value)
    assert "tract_transformers_dyn_kv_cache" in text and "0.23.0" in text and "kv_cache='explicit'" in text
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("options", "named"), [
    ({"kv_cache": "implicit"}, "kv_cache"),
    ({"kv_cache": None}, "kv_cache"),
    ({"reify_rope": "yes"}, "reify_rope"),
    ({"reify_rms_norm": 1}, "reify_rms_norm"),
])
def test_bad_options_are_refused_before_writing(options: dict[str, object], named: str, tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match=named):
        export_llm(tiny_model("llama"), tmp_path / "out", **options)  # type: ignore[arg-type]
    assert not (tmp_path / "out").exists()


def test_cache_read_elsewhere_is_not_made_stateful() -> None:
    """A cache input that something else reads too cannot become tract's state."""
    from t2n.ir import DType, Graph, Sym, TensorType

    graph = Graph()
    kind = TensorType(DType.F32, (1, 2, Sym("P"), 4))
    past = graph.add_input(kind, "in_cache_key_0")
    new = graph.add_input(TensorType(DType.F32, (1, 2, Sym("S"), 4)), "new")
    grown = graph.create_op("concat", [past, new], {"axis": 2}, names=["out_cache_key_0"]).output
    doubled = graph.create_op("add", [past, past], names=["doubled"]).output
    graph.set_outputs([grown, doubled])
    before = str(graph)
    with pytest.raises(NotExpressibleError) as err:
        StatefulKVCache([("in_cache_key_0", "out_cache_key_0")])(graph)
    assert "in_cache_key_0" in str(err.value) and "kv_cache='explicit'" in str(err.value)
    assert str(graph) == before  # nothing changed


def test_stateful_pass_removes_cache_inputs_and_outputs() -> None:
    from t2n.ir import DType, Graph, Sym, TensorType

    graph = Graph()
    past = graph.add_input(TensorType(DType.F32, (1, 2, Sym("P"), 4)), "in_cache_key_0")
    new = graph.add_input(TensorType(DType.F32, (1, 2, Sym("S"), 4)), "new")
    grown = graph.create_op("concat", [past, new], {"axis": -2}, names=["out_cache_key_0"]).output
    score = graph.create_op("mul", [grown, grown], names=["score"]).output
    graph.set_outputs([score, grown])
    result = StatefulKVCache([("in_cache_key_0", "out_cache_key_0")])(graph)
    assert result.modified and [v.name for v in graph.inputs] == ["new"]
    assert [v.name for v in graph.outputs] == ["score"]
    (op,) = [op for op in graph.ops() if op.kind == "kv_cache_append"]
    assert op.attrs["axis"] == 2 and str(op.output.type.shape[2]) == "P + S"


@pytest.mark.slow  # three child processes
def test_cli_stateful_with_reified_ops(tmp_path: Path) -> None:
    from cli.cli_support import make_runner

    from .folders import save_checkpoint

    model = tiny_model("qwen2")
    folder = save_checkpoint(model, tmp_path / "ckpt")
    out = tmp_path / "out"
    done = make_runner()("llm", "--local-dir", str(folder), "--export-dirpath", str(out), "--kv-cache", "stateful",
                         "--reify-rope-operator", "--reify-rms-norm-operator", "--num-logits-to-keep", "1")
    assert done.returncode == 0, done.stderr
    text = _graph(out / "model" / "model.nnef.tgz")
    assert "tract_transformers_dyn_kv_cache(" in text and "tract_transformers_apply_rope(" in text
    prompt = _prompt()
    assert tract_greedy_generate(out, prompt, NEW_TOKENS) == reference_tokens(model, prompt, NEW_TOKENS)
    refused = make_runner()("llm", "--local-dir", str(folder), "--export-dirpath", str(tmp_path / "old"),
                            "--kv-cache", "stateful", "--tract-version", "0.22.4")
    assert refused.returncode == 1 and "NotExpressibleError" in refused.stderr and "0.23.0" in refused.stderr
    assert not (tmp_path / "old").exists()
    usage = make_runner()("llm", "--local-dir", str(folder), "--export-dirpath", str(tmp_path / "bad"),
                          "--kv-cache", "implicit")
    assert usage.returncode == 2 and "implicit" in usage.stderr and not (tmp_path / "bad").exists()


def test_graph_refuses_to_remove_a_read_input() -> None:
    """``Graph.remove_input`` drops only an input nobody reads (else ``GraphEditError``)."""
    from t2n.ir import DType, Graph, GraphEditError, TensorType

    graph = Graph()
    x = graph.add_input(TensorType(DType.F32, (2,)), "x")
    unused = graph.add_input(TensorType(DType.F32, (2,)), "unused")
    graph.set_outputs([graph.create_op("neg", [x]).output])
    with pytest.raises(GraphEditError, match="%x"):
        graph.remove_input(x)
    graph.remove_input(unused)
    assert [v.name for v in graph.inputs] == ["x"]
    with pytest.raises(GraphEditError, match="not a graph input"):
        graph.remove_input(unused)
