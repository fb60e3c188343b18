"""The sub-networks of a NeMo speech recognizer, each a module t2n traces on its own.

The interfaces are NeMo's export interfaces (``Exportable``: ``input_types_for_export``,
``forward_for_export``, the transducer's ``RNNTDecoderJoint``): the same input and output
names, batch-first, with the lengths NeMo passes around. Every wrapper calls NeMo's own
code (``get_features``, ``forward_for_export``, a convolution encoder's blocks,
``predict``, ``joint_net``) and names its weights as the NeMo model's state dict does
(``encoder.layers.0...``). The default remodel plans (:mod:`t2n.nemo.plans`) then shape
them for an application that streams one utterance.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import torch

from t2n.errors import NemoExportError
from t2n.nemo.lengths import AudioSpan, extend_tables, is_conv_encoder

Tensors = tuple[torch.Tensor, ...]

BATCH = "B"
SAMPLES = "samples"
FRAMES = "frames"
ENCODED = "T"
LABELS = "U"
"""The symbols of the exported interfaces: the batch (collapsed by the default plans),
the audio samples, the feature frames, the encoder's frames and the prediction steps."""


@attrs.frozen
class Subnet:
    """One artifact to export: the module to trace, its interface before any plan, and
    examples at two sizes (``example(size)``: the inputs for a size index 0 or 1)."""

    name: str
    module: torch.nn.Module
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    axes: Mapping[str, Mapping[int, str]]
    example: Callable[[int], Tensors]
    role: str
    """What the application does with it (the manifest's words)."""

    def original_shape(self, name: str, rank: int) -> list[int | str]:
        """``name``'s shape as a plan's ``original_shape``: symbols where NeMo's axes are
        dynamic, the example's sizes elsewhere."""
        example = dict(zip(self.input_names, self.example(0)))[name]
        axes = self.axes.get(name, {})
        return [axes.get(i, int(example.shape[i])) for i in range(rank)]


# -- the modules traced -----------------------------------------------------------------


def unwrapped(method: Any) -> Callable[..., Any]:
    """NeMo's ``@typecheck`` methods without the check (which wants keyword calls and
    attaches neural types): the function it wraps, so that nothing global is switched."""
    return getattr(method, "__wrapped__", method)  # type: ignore[no-any-return]


class Preprocessor(torch.nn.Module):
    """Log-mel features of ``input_signal`` [B, samples] with ``length`` [B] samples each:
    ``processed_signal`` [B, features, frames] and ``processed_length`` [B].

    NeMo's featurizer runs as it is, except that its padding of the frames to a multiple
    of ``pad_to`` is left out and its last frame, which is never valid (its ``get_seq_len``
    counts one frame fewer than the STFT makes, for any length), is cut: ``frames`` is
    ``processed_length`` when the utterance fills the signal, so the encoder's length
    can be bound to it. The frames NeMo pads or cuts are masked to zeros by NeMo."""

    def __init__(self, preprocessor: Any) -> None:
        super().__init__()
        own = copy.deepcopy(preprocessor)
        own.featurizer.pad_to = 0
        # NeMo wraps the featurizer's bound forward in no_grad as an instance attribute,
        # which a deep copy shares with the original: the class's forward runs the copy.
        own.featurizer.__dict__.pop("forward", None)
        self.preprocessor = own

    def forward(self, input_signal: torch.Tensor, length: torch.Tensor) -> Tensors:
        features, lengths = self.preprocessor.get_features(input_signal.to(torch.float32), length)
        return features[:, :, :-1], lengths


class Encoder(torch.nn.Module):
    """NeMo's ``forward_for_export``: ``outputs`` [B, d_model, T] and ``encoded_lengths`` [B]."""

    def __init__(self, encoder: Any) -> None:
        super().__init__()
        self.encoder = encoder

    def forward(self, audio_signal: torch.Tensor, length: torch.Tensor) -> Tensors:
        out = self.encoder.forward_for_export(audio_signal, length)
        return out[0], out[1]


class ConvEncoder(torch.nn.Module):
    """NeMo's convolution encoder (``ConvASREncoder``: QuartzNet, Jasper, Citrinet) as NeMo
    exports it: its blocks on ``audio_signal`` [B, features, frames] and ``length`` [B] give
    ``outputs`` [B, d_model, T] and ``encoded_lengths`` [B], the masked convolutions'
    masks off (``ConvASREncoder._prepare_for_export``; on an utterance that fills the
    signal they multiply by ones). A copy is traced, its squeeze-excitation masks' frame
    range grown to the export's span: the model's own encoder is left as it is."""

    def __init__(self, encoder: Any, span: AudioSpan, subsampling: int) -> None:
        super().__init__()
        own = copy.deepcopy(encoder)
        for m in own.modules():
            if type(m).__name__ == "MaskedConv1d":
                m.use_mask = False
        extend_tables(own, span, subsampling)
        self.encoder = own

    def forward(self, audio_signal: torch.Tensor, length: torch.Tensor) -> Tensors:
        # ConvASREncoder.forward, less its growing of the tables (done once, to the span)
        out, lengths = self.encoder.encoder(([audio_signal], length))
        return out[-1], lengths


class CTCDecoder(torch.nn.Module):
    """NeMo's CTC head: ``logprobs`` [B, T, vocabulary + 1] (log-softmax, blank last)."""

    def __init__(self, decoder: Any, attribute: str) -> None:
        super().__init__()
        self.attribute = attribute
        setattr(self, attribute, decoder)

    def forward(self, encoder_output: torch.Tensor) -> torch.Tensor:
        decoder = getattr(self, self.attribute)
        return unwrapped(type(decoder).forward)(decoder, encoder_output=encoder_output)  # type: ignore[no-any-return]


class PredictionNetwork(torch.nn.Module):
    """The transducer's prediction network, one call per step: the previous labels
    ``targets`` [B, U] and the LSTM state (``input_states_1`` h, ``input_states_2`` c, each
    [layers, B, hidden]) give ``outputs`` [B, hidden, U] and the next state
    (NeMo's ``predict(..., add_sos=False)``; the blank label embeds as zeros, so the
    first step feeds the blank id and zero states)."""

    def __init__(self, decoder: Any) -> None:
        super().__init__()
        self.decoder = decoder

    def forward(self, targets: torch.Tensor, target_length: torch.Tensor, input_states_1: torch.Tensor,
                input_states_2: torch.Tensor) -> Tensors:
        g, (h, c) = self.decoder.predict(targets, state=[input_states_1, input_states_2], add_sos=False)
        return g.transpose(1, 2), target_length, h, c


class Joint(torch.nn.Module):
    """The transducer's joint network: ``encoder_outputs`` [B, d_model, T] and
    ``decoder_outputs`` [B, hidden, U] give ``outputs`` [B, T, U, vocabulary + 1
    (+ durations for TDT)], logits before any softmax (as NeMo exports it: the greedy
    choice is the same, and a TDT model's durations are not normalized with the labels)."""

    def __init__(self, joint: Any) -> None:
        super().__init__()
        self.joint = joint

    def forward(self, encoder_outputs: torch.Tensor, decoder_outputs: torch.Tensor) -> torch.Tensor:
        j = self.joint
        f = j.project_encoder(encoder_outputs.transpose(1, 2)).unsqueeze(2)
        g = j.project_prednet(decoder_outputs.transpose(1, 2)).unsqueeze(1)
        return j.joint_net(f + g)  # type: ignore[no-any-return]


# -- the sub-networks of a model ---------------------------------------------------------

_SIZES = (16000 + 77, 8000 + 13)
"""Example signals: about one second and half a second, not a whole number of hops."""


def preprocessor_subnet(preprocessor: Any) -> Subnet:
    featurizer = getattr(preprocessor, "featurizer", None)
    if featurizer is None or not hasattr(preprocessor, "get_features"):
        raise NemoExportError("preprocessor", f"{type(preprocessor).__name__} is not a NeMo mel-spectrogram "
                              "preprocessor (AudioToMelSpectrogramPreprocessor); export with "
                              "preprocessor=False and compute the features in the application")
    normalize = getattr(featurizer, "normalize", None)
    if normalize == "all_features":
        raise NemoExportError("preprocessor", "normalize='all_features' loops over the batch with .item() "
                              "(each utterance's own length); only 'per_feature', fixed statistics or no "
                              "normalization export: export with preprocessor=False and normalize in "
                              "the application")
    module = Preprocessor(preprocessor).eval()

    def example(i: int) -> Tensors:
        n = _SIZES[i]
        gen = torch.Generator().manual_seed(11 + i)
        return torch.randn(1, n, generator=gen) * 0.1, torch.tensor([n], dtype=torch.int64)

    return Subnet("preprocessor", module, ("input_signal", "length"), ("processed_signal", "processed_length"),
                  {"input_signal": {0: BATCH, 1: SAMPLES}, "length": {0: BATCH}}, example,
                  "audio samples to log-mel features")


OTHER_ENCODERS = {
    "RNNEncoder": "NeMo's recurrent encoder: LSTM, GRU or RNN layers over stacked or strided frames",
    "ParallelConvASREncoder": "NeMo's convolution encoder with parallel blocks of several kernel sizes",
    "ECAPAEncoder": "NeMo's speaker-embedding encoder",
}
"""NeMo encoders t2n.nemo refuses, with what each is (named in the refusal)."""


def encoder_subnet(encoder: Any, features: int, frames: Sequence[int], span: AudioSpan | None = None,
                   subsampling: int = 1) -> Subnet:
    """The encoder, its length tables grown to cover ``span`` (a Conformer's in place, by
    NeMo's own call; a convolution encoder's on the copy :class:`ConvEncoder` traces)."""
    conv = is_conv_encoder(encoder)
    if not conv and not hasattr(encoder, "forward_for_export"):
        name = type(encoder).__name__
        what = f" ({OTHER_ENCODERS[name]})" if name in OTHER_ENCODERS else ""
        raise NemoExportError("encoder", f"{name}{what} is not exported: it has no export interface "
                              "(forward_for_export) and t2n.nemo does not check it against NeMo; t2n.nemo exports "
                              "NeMo's Conformer and FastConformer encoders (ConformerEncoder) and its convolution "
                              "encoders (ConvASREncoder: QuartzNet, Jasper, Citrinet): use a model with one of "
                              "those, or compile this encoder yourself with t2n.compile")
    if getattr(encoder, "export_cache_support", False):
        raise NemoExportError("encoder", "the encoder is set up for cache-aware streaming export "
                              "(export_cache_support): export it with t2n.nemo.export_streaming_asr (the "
                              "encoder's step with its caches, and these artifacts), or set "
                              "model.encoder.export_cache_support = False for the whole-utterance encoder only")
    span = span if span is not None else AudioSpan(None, False)
    if conv:
        _refuse_conv_constructs(encoder)
        module: torch.nn.Module = ConvEncoder(encoder, span, subsampling).eval()
    else:
        extend_tables(encoder, span, subsampling)
        module = Encoder(encoder).eval()

    def example(i: int) -> Tensors:
        gen = torch.Generator().manual_seed(21 + i)
        return torch.randn(1, features, frames[i], generator=gen), torch.tensor([frames[i]], dtype=torch.int64)

    return Subnet("encoder", module, ("audio_signal", "length"), ("outputs", "encoded_lengths"),
                  {"audio_signal": {0: BATCH, 2: FRAMES}, "length": {0: BATCH}}, example,
                  "features to encoded frames")


def refuse_se_context(encoder: Any) -> None:
    """Squeeze-excitation over a limited context runs in a TorchScript function t2n does
    not trace: :class:`NemoExportError` naming the module and NeMo's call that avoids it."""
    for name, m in encoder.named_modules():
        if type(m).__name__ == "SqueezeExcite" and int(getattr(m, "context_window", -1)) >= 0:
            raise NemoExportError("encoder", f"encoder.{name} (SqueezeExcite) pools over a limited context "
                                  f"(se_context_size={m.context_window}) in a TorchScript function t2n does not "
                                  "trace; in inference NeMo pools over the whole utterance either way: call "
                                  "model.change_conv_asr_se_context_window(context_window=-1) (the same outputs in "
                                  "eval mode) and export again")


def _refuse_conv_constructs(encoder: Any) -> None:
    """What a convolution encoder holds that its artifact would not compute as NeMo
    does: :class:`NemoExportError` naming the module and what to do."""
    refuse_se_context(encoder)
    for name, m in encoder.named_modules():
        path = f"encoder.{name}"
        if type(m).__name__ == "GroupNorm":
            raise NemoExportError("encoder", f"{path} (GroupNorm: normalization_mode group, layer or instance) "
                                  "normalizes over time including the frames NeMo pads an utterance with "
                                  "(pad_to, the batch's longest), so NeMo's own output depends on that padding, "
                                  "which the artifacts never see; t2n.nemo exports convolution encoders with "
                                  "batch normalization (normalization_mode: batch, as NeMo's QuartzNet, Jasper "
                                  "and Citrinet models have)")


def ctc_subnet(decoder: Any, attribute: str, d_model: int) -> Subnet:
    module = CTCDecoder(decoder, attribute).eval()

    def example(i: int) -> Tensors:
        gen = torch.Generator().manual_seed(31 + i)
        return (torch.randn(1, d_model, (13, 7)[i], generator=gen),)

    return Subnet("ctc_decoder", module, ("encoder_output",), ("logprobs",),
                  {"encoder_output": {0: BATCH, 2: ENCODED}}, example,
                  "encoded frames to per-frame log-probabilities (CTC, blank last)")


def decoder_subnet(decoder: Any, blank: int) -> Subnet:
    if not hasattr(decoder, "predict") or not hasattr(decoder, "pred_rnn_layers"):
        raise NemoExportError("decoder", f"{type(decoder).__name__} is not NeMo's LSTM prediction network "
                              "(RNNTDecoder); t2n.nemo exports that one")
    layers, hidden = int(decoder.pred_rnn_layers), int(decoder.pred_hidden)
    module = PredictionNetwork(decoder).eval()

    def example(i: int) -> Tensors:
        gen = torch.Generator().manual_seed(41 + i)
        steps = (1, 3)[i]
        targets = torch.randint(0, blank + 1, (1, steps), generator=gen, dtype=torch.int64).to(torch.int32)
        state = [torch.randn(layers, 1, hidden, generator=gen) * 0.5 for _ in range(2)]
        return targets, torch.tensor([steps], dtype=torch.int32), state[0], state[1]

    return Subnet("decoder", module, ("targets", "target_length", "input_states_1", "input_states_2"),
                  ("outputs", "prednet_lengths", "output_states_1", "output_states_2"),
                  {"targets": {0: BATCH, 1: LABELS}, "target_length": {0: BATCH},
                   "input_states_1": {1: BATCH}, "input_states_2": {1: BATCH}}, example,
                  "previous label and LSTM state to prediction and next state")


def joint_subnet(joint: Any) -> Subnet:
    module = Joint(joint).eval()
    enc, pred = int(joint.encoder_hidden), int(joint.pred_hidden)

    def example(i: int) -> Tensors:
        gen = torch.Generator().manual_seed(51 + i)
        t, u = ((1, 1), (5, 3))[i]
        return torch.randn(1, enc, t, generator=gen), torch.randn(1, pred, u, generator=gen)

    return Subnet("joint", module, ("encoder_outputs", "decoder_outputs"), ("outputs",),
                  {"encoder_outputs": {0: BATCH, 2: ENCODED}, "decoder_outputs": {0: BATCH, 2: LABELS}}, example,
                  "one encoded frame and one prediction to label (and duration) logits")
