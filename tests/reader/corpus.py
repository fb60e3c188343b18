"""Small models of many kinds, compiled by t2n: the artifacts the reader must give back
byte for byte (convnets, recurrent scans, transformers, quantized weights, dynamic axes
with assertions, Khronos exports)."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import torch
from torch import nn

import t2n


class ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                  nn.MaxPool2d(2), nn.Conv2d(8, 8, 3, stride=2, groups=2), nn.GELU(),
                                  nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x).softmax(-1)


class Recurrent(nn.Module):
    def __init__(self, kind: str) -> None:
        super().__init__()
        cls = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}[kind]
        self.rnn = cls(6, 5, num_layers=2, batch_first=True, bidirectional=kind == "lstm")
        self.fc = nn.Linear(10 if kind == "lstm" else 5, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, _ = self.rnn(x)
        return self.fc(y)


class Upsampler(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.ConvTranspose1d(4, 3, 4, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.nn.functional.interpolate(self.up(x), scale_factor=2.0, mode="nearest")
        return torch.nn.functional.pad(y, (1, 2), mode="replicate")


class PassThrough(nn.Module):
    """An output that is an input unchanged, and one computed from it."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x, torch.relu(x) * 2.0


class Indexing(nn.Module):
    """Integer and boolean tensors, gathers, top-k, a running sum, ranges from sizes."""

    def forward(self, x: torch.Tensor, idx: torch.Tensor) -> tuple[torch.Tensor, ...]:
        pos = torch.arange(x.shape[1]).unsqueeze(0).float()
        v, i = torch.topk(x + pos.unsqueeze(-1), 2, dim=-1)
        mask = x > 0
        picked = torch.gather(x, 2, idx.expand(x.shape[0], x.shape[1], 1))
        return v.cumsum(1), i, mask.any(-1), picked, torch.where(mask, x, -x).flip(1)


class Spectrogram(nn.Module):
    """A log-power spectrogram (tract's STFT with its window, then complex arithmetic) and
    the spectrum of the first 16 samples (tract's FFT)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("window", torch.hann_window(16))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = torch.stft(x, 16, hop_length=4, window=self.window, return_complex=True)
        return torch.log(z.abs().pow(2) + 1e-6), torch.fft.rfft(x[:, :16]).abs()


def _encoder() -> nn.Module:
    torch.manual_seed(0)
    return nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True).eval()


def _llama(attention: str = "eager") -> nn.Module:
    import transformers as tf

    cfg = tf.LlamaConfig(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         use_cache=False)
    cfg._attn_implementation = attention
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tf.LlamaForCausalLM(cfg).eval()


class Logits(nn.Module):
    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model(ids).logits


def _quantized_convnet() -> tuple[nn.Module, torch.Tensor]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import torch.ao.quantization as tq

        class Q(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.quant, self.dequant = tq.QuantStub(), tq.DeQuantStub()
                self.conv = nn.Conv2d(3, 4, 3)
                self.fc = nn.Linear(4 * 4 * 4, 3)

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                y = torch.relu(self.conv(self.quant(x)))
                return self.dequant(self.fc(y.flatten(1)))

        torch.backends.quantized.engine = "qnnpack"
        m = Q().eval()
        m.qconfig = tq.get_default_qconfig("qnnpack")
        tq.prepare(m, inplace=True)
        x = torch.randn(1, 3, 6, 6)
        m(x)
        tq.convert(m, inplace=True)
        return m, x


Case = Callable[[], t2n.Artifact]


def _seeded(fn: Callable[[], t2n.Artifact]) -> Case:
    def run() -> t2n.Artifact:
        torch.manual_seed(0)
        return fn()
    run.__name__ = fn.__name__
    return run


CASES: dict[str, Case] = {
    "convnet": lambda: t2n.compile(ConvNet().eval(), (torch.randn(1, 3, 12, 12),)),
    "convnet_khronos": lambda: t2n.compile(ConvNet().eval(), (torch.randn(1, 3, 12, 12),), t2n.KhronosNNEF()),
    "convnet_dynamic_batch": lambda: t2n.compile(ConvNet().eval(), (torch.randn(2, 3, 12, 12),),
                                                 dynamic_axes={"input_0": {0: "B"}}),
    "lstm_scan": lambda: t2n.compile(Recurrent("lstm").eval(), (torch.randn(1, 7, 6),),
                                     dynamic_axes={"input_0": {1: "T"}}),
    "gru_seq": lambda: t2n.compile(Recurrent("gru").eval(), (torch.randn(1, 7, 6),),
                                   dynamic_axes={"input_0": {1: "T"}}),
    "rnn_khronos": lambda: t2n.compile(Recurrent("rnn").eval(), (torch.randn(1, 4, 6),), t2n.KhronosNNEF()),
    "upsample_deconv": lambda: t2n.compile(Upsampler().eval(), (torch.randn(1, 4, 5),),
                                           dynamic_axes={"input_0": {2: "L"}}),
    "upsample_khronos": lambda: t2n.compile(Upsampler().eval(), (torch.randn(1, 4, 5),), t2n.KhronosNNEF()),
    "indexing": lambda: t2n.compile(Indexing().eval(), (torch.randn(2, 5, 4), torch.tensor([[[1]]])),
                                    dynamic_axes={"input_0": {1: "S"}}),
    "encoder_assertions": lambda: t2n.compile(_encoder(), (torch.randn(1, 6, 16),),
                                              dynamic_axes={"input_0": {1: "S"}},
                                              custom_extensions=["tract_assert S <= 512"]),
    "encoder_khronos": lambda: t2n.compile(_encoder(), (torch.randn(1, 6, 16),), t2n.KhronosNNEF()),
    "llama_dynamic": lambda: t2n.compile(Logits(_llama()), (torch.randint(0, 96, (1, 5)),),
                                         dynamic_axes={"input_0": {1: "S"}}),
    "llama_sdpa": lambda: t2n.compile(Logits(_llama("sdpa")), (torch.randint(0, 96, (1, 5)),),
                                      t2n.TractNNEF(reify_sdpa_operator=True),
                                      dynamic_axes={"input_0": {1: "S"}}),
    "llama_q4_0": lambda: t2n.compile(Logits(t2n.quantize(_llama(), "min_max_q4_0_with_embeddings")),
                                      (torch.randint(0, 96, (1, 5)),), dynamic_axes={"input_0": {1: "S"}}),
    "quantized_graph_quant": lambda: t2n.compile(*_quantized_convnet_args()),
    "f16_numeric_names": lambda: t2n.compile(Recurrent("rnn").eval().half(), (torch.randn(1, 4, 6).half(),),
                                             dynamic_axes={"input_0": {1: "T"}},
                                             nnef_variable_naming_scheme="numeric"),
    "gru_scan_tract_0_22": lambda: t2n.compile(Recurrent("gru").eval(), (torch.randn(1, 7, 6),),
                                               t2n.TractNNEF("0.22.4"), dynamic_axes={"input_0": {1: "T"}}),
    "stft_spectrogram": lambda: t2n.compile(Spectrogram(), (torch.randn(1, 80),),
                                            dynamic_axes={"input_0": {1: "T"}}),
    "same_io_names": lambda: t2n.compile(PassThrough(), (torch.randn(2, 3),), input_names=["x"],
                                         output_names=["x", "y"], allow_same_io_names=True),
    "scenario_assertions": lambda: t2n.compile(_encoder(), (torch.randn(1, 6, 16),),
                                               dynamic_axes={"input_0": {1: "S"}},
                                               custom_extensions=["tract_assert S <= 64",
                                                                  "tract_assert pp: S >= 2",
                                                                  "tract_assert tg: S == 1"]),
}


def _quantized_convnet_args() -> tuple[nn.Module, tuple[torch.Tensor]]:
    m, x = _quantized_convnet()
    return m, (x,)
