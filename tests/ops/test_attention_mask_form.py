"""How attention masks are written: f32 scores get one ``add`` of an additive mask built
on the mask's own shape (one per mask, each with a fill of its own), f16 scores keep
``select(keep, scores, lowest)``. Each case pins the graph text and runs the artifact in
tract (and the Khronos interpreter where it reads the model), including the pattern that
makes tract 0.23.9 leave a Dummy op when two identical masks get identical addends."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import t2n
import t2n.frontend.lowering.attention_mask as attention_mask
from t2n.errors import EngineError
from t2n.testing import Lambda, check_export

sdpa = F.scaled_dot_product_attention

F32_LOWEST = float(np.finfo(np.float32).min)
ADDEND = re.compile(r"(\w+) = select\((\w+), 0\.0, (-3\.40282\d*e\+?38)\);")
"""An additive mask: ``select(keep, 0.0, fill)``."""
SELECT_FORM = re.compile(r"= select\(\w+, \w+, (?:tract_core_cast\()?(-[\d.]+(?:e\+?\d+)?)")
"""The select form: ``select(keep, scores, lowest)``."""


def qkv(dtype: torch.dtype = torch.float32, batch: int = 2) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(batch, 2, 5, 4, generator=g).to(dtype) for _ in range(3))


def padding(batch: int = 2) -> torch.Tensor:
    """(batch, 5) ids-like mask: 1 = a real token; the last sequence has 2 padded keys."""
    pad = torch.ones(batch, 5, dtype=torch.long)
    pad[-1, 3:] = 0
    return pad


def addends(graph: str) -> list[tuple[str, str, float]]:
    """(name, mask, fill) of every additive mask in ``graph``."""
    return [(name, keep, float(fill)) for name, keep, fill in ADDEND.findall(graph)]


def assert_add_form(graph: str, n_masks: int) -> None:
    found = addends(graph)
    assert len(found) == n_masks, graph
    fills = [fill for _, _, fill in found]
    assert len(set(fills)) == len(fills), f"two additive masks share a fill: {fills}"
    assert all(fill < -3.4e38 and fill != F32_LOWEST for fill in fills), fills
    for name, _, _ in found:
        assert re.search(rf"= add\(\w+, {name}(_r\d)?\);", graph), f"{name} is not added to the scores:\n{graph}"
    assert not SELECT_FORM.search(graph), graph


def test_bool_mask_is_one_add_of_an_additive_mask_in_tract_and_khronos():
    model = Lambda(lambda q, k, v, keep: sdpa(q, k, v, attn_mask=keep))
    keep = torch.rand(2, 1, 5, 5, generator=torch.Generator().manual_seed(1)) > 0.3
    keep[..., 0] = True
    res = check_export(model, (*qkv(), keep))
    for art in res.artifacts.values():
        assert_add_form(art.graph_nnef, 1)
        assert "inf" not in art.graph_nnef.replace("info", "")


def test_causal_and_padding_masks_of_every_layer_share_one_additive_mask():
    """Two layers over one padding mask and is_causal-style tril: one addend, two adds."""

    def two_layers(q, k, v, pad):
        causal = torch.ones(5, 5, dtype=torch.bool).tril()
        keep = causal & pad.bool()[:, None, None, :]
        h = sdpa(q, k, v, attn_mask=keep)
        return sdpa(h, k, v, attn_mask=keep)

    res = check_export(Lambda(two_layers), (*qkv(), padding()), targets=("tract",))
    graph = res.artifacts["tract"].graph_nnef
    assert_add_form(graph, 1)
    assert len(re.findall(rf"= add\(\w+, {addends(graph)[0][0]}(_r\d)?\);", graph)) == 2


def test_is_causal_is_an_additive_mask():
    """Static sizes: the additive mask is a constant (folded like any, up to 1 MB);
    a dynamic length builds it at run time."""
    model = Lambda(lambda q, k, v: sdpa(q, k, v, is_causal=True))
    res = check_export(model, qkv())
    for art in res.artifacts.values():
        graph = art.graph_nnef
        assert re.search(r"(\w+) = variable<scalar>\(shape = \[5, 5\]", graph), graph
        assert re.search(r"= add\(matmul, \w+\);", graph) and not SELECT_FORM.search(graph), graph
    axes = {f"input_{i}": {2: "S"} for i in range(3)}
    art = t2n.compile(model, qkv(), t2n.TractNNEF(dynamic_axes=axes))
    assert_add_form(art.graph_nnef, 1)
    q, k, v = (torch.randn(2, 2, 9, 4) for _ in range(3))
    art.check(inputs=[q.numpy(), k.numpy(), v.numpy()], expected=[model(q, k, v).numpy()])


def test_float_mask_is_added_as_before():
    mask = torch.randn(2, 1, 5, 5)
    mask[0, 0, 2, :] = float("-inf")  # a row that attends to nothing: zeros
    res = check_export(Lambda(lambda q, k, v, m: sdpa(q, k, v, attn_mask=m)), (*qkv(), mask))
    graph = res.artifacts["tract"].graph_nnef
    assert not addends(graph) and not SELECT_FORM.search(graph), graph


def test_f16_scores_keep_the_select():
    """In f16 a score plus the lowest f16 may round to -inf: the select stays."""
    q, k, v = qkv(torch.float16)
    keep = padding().bool()[:, None, None, :]
    res = check_export(Lambda(lambda q, k, v, keep: sdpa(q, k, v, attn_mask=keep)), (q, k, v, keep),
                       targets=("tract",))
    graph = res.artifacts["tract"].graph_nnef
    assert not addends(graph)
    assert SELECT_FORM.findall(graph) == ["-65504.0"], graph  # the scores' select; none on the mask


DEAD_ROW = 3


def dead_row_mask() -> torch.Tensor:
    keep = torch.rand(2, 1, 5, 5, generator=torch.Generator().manual_seed(2)) > 0.4
    keep[..., 0] = True
    keep[:, :, DEAD_ROW] = False  # query 3 may attend to nothing
    return keep


FULLY_MASKED = {
    "bool": lambda: (lambda q, k, v, m: sdpa(q, k, v, attn_mask=m), dead_row_mask()),
    "float": lambda: (lambda q, k, v, m: sdpa(q, k, v, attn_mask=m),
                      torch.zeros(2, 1, 5, 5).masked_fill(~dead_row_mask(), float("-inf"))),
    "bool_and_causal": lambda: (lambda q, k, v, m: sdpa(q, k, v, attn_mask=m & torch.ones(5, 5).tril().bool()),
                                dead_row_mask()),
}


@pytest.mark.parametrize("kind", sorted(FULLY_MASKED))
def test_fully_masked_rows_are_exactly_what_pytorch_gives(kind):
    """PyTorch's SDPA gives zeros for a query that attends to nothing; so do both
    engines, bit for bit (the rest of the output at the usual tolerance)."""
    fn, mask = FULLY_MASKED[kind]()
    dead = Lambda(lambda q, k, v, m: fn(q, k, v, m)[:, :, DEAD_ROW])
    assert torch.all(dead(*qkv(), mask) == 0)
    check_export(dead, (*qkv(), mask), tolerance="exact")
    check_export(Lambda(fn), (*qkv(), mask))


class TwiceMasked(nn.Module):
    """The same padding mask computed twice from one input, the first attention feeding
    the second's keys: what a BART encoder and its decoder's cross-attention do, and the
    pattern where identical addends make tract 0.23.9 leave a Dummy op."""

    def forward(self, x: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        h = sdpa(x, x, x, attn_mask=pad.bool()[:, None, None, :])
        return sdpa(x, h, h, attn_mask=pad.bool()[:, None, None, :])


def test_identical_masks_get_different_fills_and_run_in_tract():
    res = check_export(TwiceMasked(), (qkv()[0], padding()))
    assert_add_form(res.artifacts["tract"].graph_nnef, 2)


def test_identical_fills_are_what_tract_fails_on(monkeypatch):
    """The guard is needed: with one fill for both masks tract 0.23.9 cannot run the
    model (if a later tract can, the distinct fills cost nothing either)."""
    monkeypatch.setattr(attention_mask, "nth_fill", lambda dtype, n: float(np.nextafter(np.float32(F32_LOWEST),
                                                                                           np.float32(0))))
    art = t2n.compile(TwiceMasked().eval(), (qkv()[0], padding()), t2n.TractNNEF())
    assert len({fill for _, _, fill in addends(art.graph_nnef)}) == 1
    from t2n.backends.tract.environments import installed_tract_version

    assert installed_tract_version() == "0.23.9", (
        f"the Dummy-op failure is tract 0.23.9's (installed: {installed_tract_version()}): "
        "check whether this tract still fails, and drop the distinct fills if not")
    with pytest.raises(EngineError, match="Dummy"):
        art.check()


MINIMAL_TRIGGER = """version 1.0;

graph main(mask, x) -> (out)
{
    mask = external<logical>(shape = [7]);
    x = external<scalar>(shape = [7, 7]);
    m1 = unsqueeze(mask, axes = [0]);
    a1 = add(x, select(m1, 0.0, FILL1));
    m2 = unsqueeze(mask, axes = [0]);
    a2 = add(a1, select(m2, 0.0, FILL2));
    out = select(m2, a2, 0.0);
}
"""


@pytest.mark.parametrize("fills", [("-1.0e30", "-1.0e30"), ("-1.0e30", "-2.0e30")], ids=["same", "different"])
def test_the_smallest_graph_tract_fails_on(tmp_path, fills):
    """docs/attention_masks.md's graph: two identical masks, each with an identical
    addend, the second mask read again. With different fills it runs."""
    import tract

    from t2n.backends.tract.environments import installed_tract_version

    (tmp_path / "graph.nnef").write_text(MINIMAL_TRIGGER.replace("FILL1", fills[0]).replace("FILL2", fills[1]))
    mask = np.array([True, True, False, True, False, True, True])
    x = np.random.default_rng(0).standard_normal((7, 7)).astype(np.float32)
    model = tract.nnef().load(str(tmp_path)).into_runnable()
    if fills[0] == fills[1]:
        assert installed_tract_version() == "0.23.9", "the trigger is tract 0.23.9's: check it again on this tract"
        with pytest.raises(Exception, match="Dummy"):
            model.run([mask, x])
        return
    out = model.run([mask, x])[0].to_numpy()
    addend = np.where(mask, 0.0, -1.0e30) + np.where(mask, 0.0, -2.0e30)
    np.testing.assert_array_equal(out, np.where(mask, x + addend, 0.0).astype(np.float32))


def tiny_bart(attn: str) -> tuple[nn.Module, tuple[torch.Tensor, ...], dict[str, torch.Tensor]]:
    import transformers as tf

    cfg = tf.BartConfig(vocab_size=99, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
                        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
                        max_position_embeddings=64, use_cache=False)
    cfg._attn_implementation = attn
    torch.manual_seed(0)
    ids = torch.randint(3, 99, (2, 7), generator=torch.Generator().manual_seed(0))
    mask = torch.ones(2, 7, dtype=torch.long)
    mask[1, 5:] = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tf.BartModel(cfg).eval(), (ids,), {"attention_mask": mask}


def tiny_llama(attn: str) -> tuple[nn.Module, tuple[torch.Tensor, ...], dict[str, torch.Tensor]]:
    import transformers as tf

    cfg = tf.LlamaConfig(vocab_size=99, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, use_cache=False)
    cfg._attn_implementation = attn
    torch.manual_seed(0)
    ids = torch.randint(3, 99, (2, 7), generator=torch.Generator().manual_seed(0))
    mask = torch.ones(2, 7, dtype=torch.long)
    mask[1, :3] = 0  # left padding: the first queries of sequence 2 see no real key
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tf.LlamaModel(cfg).eval(), (ids,), {"attention_mask": mask}


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("build", [tiny_llama, tiny_bart], ids=["llama", "bart"])
def test_transformers_attentions_with_padding(build, attn):
    """Eager attention brings its own float masks (``where(keep, 0, finfo.min)``, added as
    they are, tract runs them); SDPA attention hands bool masks to SDPA, which become
    additive masks with a fill each."""
    model, args, kwargs = build(attn)
    res = check_export(model, args, kwargs=kwargs, targets=("tract",))
    graph = res.artifacts["tract"].graph_nnef
    ours = [fill for _, _, fill in addends(graph) if fill != F32_LOWEST]
    assert len(set(ours)) == len(ours)
    assert not SELECT_FORM.search(graph), graph
    assert bool(ours) == (attn == "sdpa"), graph


@pytest.mark.parametrize("version", ["0.21.19", "0.22.4"])
def test_older_tract_runs_the_additive_masks(version, tmp_path):
    """The add form is standard NNEF: tract releases before 0.23 run it too."""
    from tract_matrix_support import environment_or_skip

    from t2n.backends.tract.environments import TractJob, run_jobs
    from t2n.check.compare import Tolerance, compare

    environment_or_skip(version)  # made on first use; under CI a failure to make it fails
    art = t2n.compile(TwiceMasked().eval(), (qkv()[0], padding()), t2n.TractNNEF(version))
    assert_add_form(art.graph_nnef, 2)
    path = art.save(tmp_path / "twice.nnef.tgz")
    [result] = run_jobs(version, [TractJob(str(path), list(art.example_inputs), art.rendered.registries)])
    assert not isinstance(result, EngineError), result
    assert compare(f"tract {version}", art.output_names, result, art.reference_outputs, Tolerance.APPROXIMATE).ok
