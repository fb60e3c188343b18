"""The sub-networks of a NeMo classifier, and their default remodel plans.

A classifier's decoder sees every frame NeMo's featurizer gives: the valid ones, the
last STFT frame (never valid, masked to ``pad_value``) and the frames that pad them to a
multiple of ``pad_to``. An utterance classifier averages over all of them, a frame
classifier labels each. So, unlike a recognizer's, the classifier's encoder artifact
takes the valid features (what the shared preprocessor artifact gives) and puts NeMo's
padding back before NeMo's encoder runs on them with its masks on, as in NeMo's forward
on one utterance: the artifacts then give NeMo's outputs, frame for frame.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import torch

from t2n.nemo.classifier import ClassifierFacts
from t2n.nemo.plans import batched, encoder_plan, preprocessor_plan
from t2n.nemo.subnets import BATCH, ENCODED, FRAMES, Subnet, Tensors, refuse_se_context, unwrapped


class PaddedConvEncoder(torch.nn.Module):
    """NeMo's convolution encoder on NeMo's padded features: ``audio_signal`` [B, features,
    frames] (the valid frames) and ``length`` [B] give ``outputs`` [B, d_model, T] for the
    ``frames + 1`` frames rounded up to a multiple of ``pad_to``, and ``encoded_lengths``.

    The padding is cut from a constant one (``pad_to + 1`` frames) to the length NeMo's
    arithmetic gives, so the artifact's output length follows ``frames``. A copy is traced,
    its mask tables grown to ``max_frames`` padded frames."""

    def __init__(self, encoder: Any, facts: ClassifierFacts, max_frames: int) -> None:
        super().__init__()
        own = copy.deepcopy(encoder)
        parameter = next(own.parameters(), None)
        own.update_max_sequence_length(seq_length=max_frames + facts.pad_to + 1,
                                       device=parameter.device if parameter is not None else "cpu")
        self.encoder = own
        self.pad_to = facts.pad_to
        self.pad_value = facts.pad_value

    def forward(self, audio_signal: torch.Tensor, length: torch.Tensor) -> Tensors:
        frames = audio_signal.shape[2]
        total = (frames + self.pad_to) // self.pad_to * self.pad_to if self.pad_to > 0 else frames + 1
        padded = torch.nn.functional.pad(audio_signal, (0, self.pad_to + 1), value=self.pad_value)
        out, lengths = self.encoder.encoder(([padded[:, :, :total]], length))
        return out[-1], lengths


class UtteranceDecoder(torch.nn.Module):
    """NeMo's ``ConvASRDecoderClassification``: ``encoder_output`` [B, d_model, T] pooled
    over T, then ``logits`` [B, labels] (probabilities when its ``return_logits`` is off)."""

    def __init__(self, decoder: Any) -> None:
        super().__init__()
        self.decoder = decoder

    def forward(self, encoder_output: torch.Tensor) -> torch.Tensor:
        return unwrapped(type(self.decoder).forward)(self.decoder, encoder_output=encoder_output)  # type: ignore[no-any-return]


class FrameDecoder(torch.nn.Module):
    """A frame classifier's decoder as its ``forward`` calls it, on the frames last:
    ``encoder_output`` [B, d_model, T] gives ``outputs`` [B, T, labels]."""

    def __init__(self, decoder: Any) -> None:
        super().__init__()
        self.decoder = decoder

    def forward(self, encoder_output: torch.Tensor) -> torch.Tensor:
        return self.decoder(encoder_output.transpose(1, 2))  # type: ignore[no-any-return]


def padded_encoder_subnet(encoder: Any, facts: ClassifierFacts, frames: Sequence[int],
                          max_frames: int | None) -> Subnet:
    """The encoder, traced on the ``frames`` of two examples, its tables covering ``max_frames``."""
    refuse_se_context(encoder)
    module = PaddedConvEncoder(encoder, facts, max_frames or max(frames)).eval()

    def example(i: int) -> Tensors:
        gen = torch.Generator().manual_seed(21 + i)
        return (torch.randn(1, facts.features, frames[i], generator=gen),
                torch.tensor([frames[i]], dtype=torch.int64))

    return Subnet("encoder", module, ("audio_signal", "length"), ("outputs", "encoded_lengths"),
                  {"audio_signal": {0: BATCH, 2: FRAMES}, "length": {0: BATCH}}, example,
                  "features to encoded frames (NeMo's padding of the features put back)")


def classifier_decoder_subnet(decoder: Any, facts: ClassifierFacts) -> Subnet:
    frame = facts.kind == "frame"
    module = (FrameDecoder(decoder) if frame else UtteranceDecoder(decoder)).eval()

    def example(i: int) -> Tensors:
        gen = torch.Generator().manual_seed(31 + i)
        return (torch.randn(1, facts.d_model, (13, 7)[i], generator=gen),)

    role = "encoded frames to per-frame class " if frame else "encoded frames, pooled, to class "
    return Subnet("decoder", module, ("encoder_output",), ("outputs" if frame else "logits",),
                  {"encoder_output": {0: BATCH, 2: ENCODED}}, example,
                  role + facts.outputs.replace("_", "-"))


def classifier_plans(facts: ClassifierFacts, names: list[str], max_frames: int | None) -> dict[str, Any]:
    """The default plan of each sub-network in ``names``: one utterance, lengths bound to
    the axes they measure, as a recognizer's (:mod:`t2n.nemo.plans`)."""
    output = "outputs" if facts.kind == "frame" else "logits"
    plans: dict[str, Any] = {
        "preprocessor": preprocessor_plan(),
        "encoder": encoder_plan(facts.features, max_frames),
        "decoder": {"inputs": {"encoder_output": batched([BATCH, facts.d_model, ENCODED])},
                    "outputs": {output: {"collapse_dims": [0]}}},
    }
    return {name: plans[name] for name in names}
