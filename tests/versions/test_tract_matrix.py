"""Each model exported with TractNNEF(version) loads in that very tract release and gives
PyTorch's numbers: conv net, LSTM, GRU, LSTM over a dynamic length, transformer encoder,
causal attention, LLaMA and BERT over a dynamic length, bf16 weights as f16 and the ops whose
fused tract form is new in 0.23 (rms_norm, silu, tanh-GELU, is_inf/is_nan, any/all) or
whose older kernels differ (integer sign and division, average pools counting padding).

One test per version: its models are exported, then run together in one child process
of that version's environment (t2n.backends.tract.environments)."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
import pytest
import torch
import torch.nn as nn
from tract_matrix_support import VERSIONS, environment_or_skip

import t2n
from t2n.backends.tract.environments import TractJob, run_jobs
from t2n.check.compare import Tolerance, compare
from t2n.errors import EngineError

Case = tuple[nn.Module, tuple[torch.Tensor, ...], dict[str, object], list[tuple[torch.Tensor, ...]], str]
"""model, example inputs, compile keywords, more inputs (other lengths), tolerance."""


class _Recurrent(nn.Module):
    def __init__(self, rnn: nn.RNNBase) -> None:
        super().__init__()
        self.rnn = rnn

    def forward(self, x):
        y, h = self.rnn(x)
        return y, (h if isinstance(h, torch.Tensor) else h[0])


class _Attention(nn.Module):
    def forward(self, q, k, v):
        return nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)


class _NewOps(nn.Module):
    """Every op whose fused tract operation older versions lack."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.RMSNorm(16, eps=1e-5)

    def forward(self, x):
        f = nn.functional
        bad = x / (x > 0.5).float()  # inf where x <= 0.5 and x > 0, nan at 0/0 never
        flags = torch.isinf(bad) | torch.isnan(bad - bad)
        ints = (x * 10).to(torch.int64)
        return (self.norm(x), f.silu(x), f.gelu(x, approximate="tanh"), x.softmax(-1),
                flags, (x > 0).any(-1), (x > -3).all(-1), torch.sign(ints), torch.div(ints, 4, rounding_mode="trunc"),
                ints // 3, nn.functional.avg_pool1d(x.unsqueeze(0), 3, 2, 1), x.double().abs())


def conv() -> Case:
    m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                      nn.AvgPool2d(3, stride=1, padding=1),  # padding counted in the divisor
                      nn.Conv2d(8, 8, 3, stride=2, groups=2), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                      nn.Linear(8, 4))
    return m.eval(), (torch.randn(2, 3, 16, 16),), {}, [], "approximate"


def lstm() -> Case:
    m = _Recurrent(nn.LSTM(6, 8, num_layers=2, batch_first=True)).eval()
    return m, (torch.randn(2, 5, 6),), {}, [], "approximate"


def gru() -> Case:
    return _Recurrent(nn.GRU(6, 8, bidirectional=True)).eval(), (torch.randn(5, 2, 6),), {}, [], "approximate"


def lstm_dynamic() -> Case:
    m = _Recurrent(nn.LSTM(6, 8, batch_first=True)).eval()
    return (m, (torch.randn(2, 5, 6),), {"dynamic_axes": {"x": {1: "T"}}, "input_names": ["x"]},
            [(torch.randn(2, 9, 6),)], "approximate")


def encoder() -> Case:
    layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True, activation="gelu")
    m = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    return m, (torch.randn(2, 7, 16),), {}, [], "approximate"


def attention() -> Case:
    return _Attention().eval(), tuple(torch.randn(2, 4, 7, 8) for _ in range(3)), {}, [], "approximate"


def llama() -> Case:
    import transformers as tf

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = tf.LlamaForCausalLM(tf.LlamaConfig(
            vocab_size=99, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
            use_cache=False)).eval()
    return (m, (torch.randint(0, 99, (1, 9)),), {"dynamic_axes": {"ids": {1: "S"}}, "input_names": ["ids"]},
            [(torch.randint(0, 99, (1, 4)),)], "approximate")


def bert_dynamic() -> Case:
    """Position ids sliced to the dynamic length out of a 64-long buffer."""
    import transformers as tf

    m = tf.BertModel(tf.BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                                   intermediate_size=64, max_position_embeddings=64)).eval()
    return (m, (torch.randint(0, 99, (1, 9)),), {"dynamic_axes": {"ids": {1: "S"}}, "input_names": ["ids"]},
            [], "approximate")


def bf16_as_f16() -> Case:
    m = nn.Sequential(nn.Linear(16, 32), nn.GELU(approximate="tanh"), nn.LayerNorm(32), nn.Linear(32, 8),
                      nn.Softmax(-1)).to(torch.bfloat16).eval()
    return m, (torch.randn(4, 16).to(torch.bfloat16),), {}, [], "very_loose"


def new_ops() -> Case:
    return _NewOps().eval(), (torch.randn(3, 16),), {}, [], "approximate"


MODELS: dict[str, Callable[[], Case]] = {
    "conv": conv, "lstm": lstm, "gru": gru, "lstm_dynamic": lstm_dynamic, "encoder": encoder,
    "attention": attention, "llama_dynamic": llama, "bert_dynamic": bert_dynamic, "bf16_as_f16": bf16_as_f16, "new_ops": new_ops,
}


def _reference(model: nn.Module, inputs: tuple[torch.Tensor, ...]) -> list[np.ndarray]:
    with torch.no_grad():
        out = model(*inputs)
    out = out.logits if hasattr(out, "logits") else out
    out = out.to_tuple() if hasattr(out, "to_tuple") else out
    outs = out if isinstance(out, tuple) else (out,)
    return [o.float().numpy() if o.dtype == torch.bfloat16 else o.numpy() for o in outs]


def _as_input(x: torch.Tensor, target: t2n.TractNNEF) -> np.ndarray:
    return x.float().numpy().astype(np.float16) if x.dtype == torch.bfloat16 else x.numpy()


@pytest.mark.slow
@pytest.mark.parametrize("version", VERSIONS)
def test_every_model_loads_and_matches_pytorch_in_its_tract_version(version, tmp_path):
    environment_or_skip(version)
    jobs, expected = [], []
    for name, make in MODELS.items():
        torch.manual_seed(0)
        model, args, kwargs, more, tol = make()
        dynamic = kwargs.pop("dynamic_axes", None)
        target = t2n.TractNNEF(version, dynamic_axes=dynamic)
        art = t2n.compile(model, args, target, **kwargs)  # type: ignore[arg-type]
        path = art.save(tmp_path / f"{name}.nnef.tgz")
        runs = [(art.example_inputs, art.reference_outputs)]
        runs += [([_as_input(x, target) for x in ins], _reference(model, ins)) for ins in more]
        for ins, refs in runs:
            jobs.append(TractJob(str(path), [np.asarray(x) for x in ins], art.rendered.registries))
            expected.append((name, art.output_names, [np.asarray(r) for r in refs], tol))
    failures = []
    for result, (name, names, refs, tol) in zip(run_jobs(version, jobs), expected):
        if isinstance(result, EngineError):
            failures.append(f"{name}: {result}")
            continue
        report = compare(f"tract {version}", names, result, refs, Tolerance.parse(tol))
        if not report.ok:
            failures.append(f"{name}: {report}")
    assert not failures, f"tract {version}:\n" + "\n".join(failures)
