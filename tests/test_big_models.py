"""Models whose weights live on disk (meta device + weights_from), weights held by
reference through the compiler, and the format's 4 GiB limit. Small sizes: the
LLM-size figures are in benchmarks/."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.torch import save_file

import t2n
from t2n.errors import InvalidArgumentError, TensorTooLargeError
from t2n.ir import DType, LazyData
from t2n.ir.tensor_data import ConvertedData


class Net(torch.nn.Module):
    """Linear/GELU/LayerNorm with a weight tied between two layers and a buffer."""

    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(16, 16)
        self.norm = torch.nn.LayerNorm(16)
        self.l2 = torch.nn.Linear(16, 16, bias=False)
        self.l2.weight = self.l1.weight
        self.head = torch.nn.Linear(16, 4)
        self.register_buffer("scale", torch.linspace(0.5, 2.0, 16))

    def forward(self, x):
        h = self.norm(torch.nn.functional.gelu(self.l1(x * self.scale)))
        return self.head(self.l2(h))


def _real():
    torch.manual_seed(0)
    return Net().eval()


def _meta():
    with torch.device("meta"):
        return Net().eval()


def _state(model):
    """The checkpoint as transformers writes it: one name per tied tensor (here the
    second one, so that the lookup by alias is exercised)."""
    sd = {k: v.contiguous() for k, v in model.state_dict().items()}
    del sd["l1.weight"]
    return sd


X = torch.randn(3, 16)


def _check(art, model, tmp_path, name="m.tar"):
    art.save(tmp_path / name)
    with torch.no_grad():
        expected = model(X).numpy()
    return art.check(inputs=[X.numpy()], expected=[expected])


@pytest.mark.parametrize("fmt", ["safetensors", "pt", "mapping"])
def test_meta_model_exported_with_weights_from_disk(tmp_path, fmt):
    real = _real()
    if fmt == "safetensors":
        source = tmp_path / "w.safetensors"
        save_file(_state(real), source)
    elif fmt == "pt":
        source = tmp_path / "w.pt"
        torch.save(_state(real), source)
    else:
        source = _state(real)
    art = t2n.compile(_meta(), (X,), weights_from=source, verify_ir=True)
    assert art.reference_outputs == []
    assert _check(art, real, tmp_path, "m.tgz" if fmt == "pt" else "m.tar").ok
    labels = sorted(t.label for t in art.rendered.tensors)
    assert labels == ["head.bias", "head.weight", "l1.bias", "l1.weight", "norm.bias", "norm.weight", "scale"]
    with pytest.raises(InvalidArgumentError, match="no PyTorch reference outputs"):
        art.check()


def test_safetensors_weights_are_read_only_when_saved(tmp_path):
    real = _real()
    save_file(_state(real), tmp_path / "w.safetensors")
    art = t2n.compile(_meta(), (X,), weights_from=tmp_path / "w.safetensors")
    data = {t.label: t.data for t in art.rendered.tensors}
    assert isinstance(data["head.weight"], LazyData)
    (tmp_path / "w.safetensors").unlink()  # nothing was read: the save needs the file
    with pytest.raises(FileNotFoundError, match="w.safetensors"):
        art.save(tmp_path / "m.tar")
    assert not (tmp_path / "m.tar").exists()


def test_bf16_checkpoint_into_an_f32_model(tmp_path):
    real = _real()
    state = {k: v.to(torch.bfloat16) for k, v in _state(real).items()}
    save_file(state, tmp_path / "w.safetensors")
    art = t2n.compile(_meta(), (X,), weights_from=tmp_path / "w.safetensors")
    assert isinstance({t.label: t.data for t in art.rendered.tensors}["head.weight"], ConvertedData)
    rounded = _real()
    with torch.no_grad():
        for p in [*rounded.parameters(), *rounded.buffers()]:
            p.copy_(p.to(torch.bfloat16).float())
    assert _check(art, rounded, tmp_path).ok


def test_real_weights_can_come_from_disk_too(tmp_path):
    real = _real()
    other = _real()
    with torch.no_grad():
        other.head.bias.fill_(3.0)
    save_file({"head.bias": other.head.bias.detach().clone()}, tmp_path / "b.safetensors")
    art = t2n.compile(real, (X,), weights_from=tmp_path / "b.safetensors")
    assert _check(art, other, tmp_path).ok


def test_missing_and_mismatched_weights_are_all_listed():
    real = _real()
    state = _state(real)
    del state["head.bias"], state["scale"]
    state["norm.weight"] = torch.ones(5)
    state["l2.weight"] = state["l2.weight"].long()
    with pytest.raises(InvalidArgumentError) as err:
        t2n.compile(_meta(), (X,), weights_from=state)
    text = str(err.value)
    assert "4 parameter(s)/buffer(s)" in text
    for bit in ("head.bias: on the meta device", "scale: on the meta device",
                "norm.weight: shape [5]", "l2.weight: i64 in the weights, f32 in the model"):
        assert bit in text


def test_the_graph_holds_references_to_the_weights():
    """From trace to rendered tensors, every weight is the model's own memory."""
    model = _real()
    art = t2n.compile(model, (X,))
    params = dict(model.named_parameters())
    params.update(model.named_buffers())
    rendered = {t.label: t.data for t in art.rendered.tensors}
    assert set(rendered) == {"l1.weight", "l1.bias", "norm.weight", "norm.bias", "head.weight",
                             "head.bias", "scale"}
    for label, data in rendered.items():
        assert np.shares_memory(data.raw(), params[label].detach().numpy()), label


def test_a_tensor_over_4_gib_is_refused_before_writing(tmp_path):
    with torch.device("meta"):
        big = torch.nn.Linear(32769, 32768, bias=False)  # 4 GiB + 128 KiB of f32

    def never():
        raise AssertionError("read")

    weights = {"weight": LazyData(DType.F32, (32768, 32769), load=never, chunks=lambda n: never())}
    art = t2n.compile(big, (torch.randn(1, 32769),), weights_from=weights)
    with pytest.raises(TensorTooLargeError, match="4 GiB"):
        art.save(tmp_path / "m.tar")
    assert list(tmp_path.iterdir()) == []


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.sampled_from(["a", "a_1", "a_2", "b", "a_1_1", "x_05"])),
                max_size=60))
def test_unique_names_are_those_of_a_search_from_1(steps):
    """Graph.unique_name remembers the next free suffix (it was quadratic in the number
    of values sharing a hint); the names must stay those of the plain search."""
    from t2n.ir import Graph

    g = Graph()
    naive: set[str] = set()
    for add, hint in steps:
        if add:
            name, i = hint, 1
            while name in naive:
                name, i = f"{hint}_{i}", i + 1
            naive.add(name)
            assert g.unique_name(hint) == name
        elif naive:
            victim = sorted(naive)[len(naive) // 2]
            naive.discard(victim)
            g._names.discard(victim)


def test_naming_many_values_with_one_hint_is_linear():
    from t2n.ir import Graph

    g = Graph()
    names = [g.unique_name("matmul") for _ in range(20000)]
    assert names[:3] == ["matmul", "matmul_1", "matmul_2"] and names[-1] == "matmul_19999"
    assert g._names.next_suffix["matmul"] == 20000


def test_weights_from_is_refused_for_script_modules():
    scripted = torch.jit.script(torch.nn.Linear(4, 2))
    with pytest.raises(InvalidArgumentError, match="weights_from"):
        t2n.compile(scripted, (torch.randn(1, 4),), weights_from={"weight": torch.zeros(2, 4)})
