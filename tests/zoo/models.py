"""The zoo's architectures: one entry per transformers class, built from a tiny config with
random weights (no hub downloads), with the example inputs its forward takes; the torchaudio
and diffusers groups (``torchaudio_models``, ``diffusers_models``) give their own builders.

Text models get the same small sizes through ``COMMON`` (only the keys their config class
knows); vision, audio and detection models name their own stage sizes, as their config
classes' defaults are full-size models that would make the zoo slow.
"""

from __future__ import annotations

import inspect
import warnings
from typing import Any

import torch
import transformers as tf

from .diffusers_models import DIFFUSERS
from .entry import Entry
from .torchaudio_models import TORCHAUDIO

V = 99

COMMON: dict[str, Any] = dict(
    vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
    max_position_embeddings=64, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
    decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, d_ff=64, d_kv=8, num_layers=1,
    num_heads=4, n_embd=32, n_layer=2, n_head=4, n_positions=64, embedding_size=32, use_cache=False,
    pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1, cls_token_id=1, sep_token_id=2,
)


def _ids():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, V, (2, 7), generator=g)
    mask = torch.ones(2, 7, dtype=torch.long)
    mask[1, 5:] = 0  # a padded second sequence
    return ids, mask


def _inputs(kind, cfg) -> tuple[tuple, dict]:
    g = torch.Generator().manual_seed(1)
    ids, mask = _ids()
    if callable(kind):
        return kind(cfg)
    if kind == "ids":
        return (ids,), {}
    if kind == "text":
        return (ids,), dict(attention_mask=mask)
    if kind == "seq2seq":
        return (ids,), dict(attention_mask=mask, decoder_input_ids=ids[:, :4])
    if kind == "choice":
        return (ids[None].expand(1, 2, 7).contiguous(),), dict(attention_mask=mask[None])
    if kind.startswith("image"):
        size = int(kind[5:] or 32)
        return (torch.randn(1, 3, size, size, generator=g),), {}
    if kind == "wave":
        return (torch.randn(1, 800, generator=g),), {}
    raise KeyError(kind)


def _config(entry: Entry):
    model_cls = getattr(tf, entry.model)
    cfg_cls = model_cls.config_class
    kw = {}
    if entry.common:
        known = set(inspect.signature(cfg_cls.__init__).parameters) | set(cfg_cls().to_dict())
        kw = {k: v for k, v in COMMON.items() if k in known}
    kw.update(entry.config)
    return model_cls, cfg_cls(**kw)


def build(entry: Entry) -> tuple[torch.nn.Module, tuple, dict]:
    """The model in eval mode (eager attention, seed 0) and its example args and kwargs."""
    if entry.make is not None:
        torch.manual_seed(0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return entry.make()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model_cls, cfg = _config(entry)
        cfg._attn_implementation = "eager"
        torch.manual_seed(0)
        model = model_cls(cfg).eval()
    args, kwargs = _inputs(entry.inputs, cfg)
    return model, args, kwargs


def _whisper(cfg):
    return (torch.randn(1, cfg.num_mel_bins, 2 * cfg.max_source_positions),), dict(
        decoder_input_ids=torch.tensor([[1, 5, 6]]))


def _speech2text(cfg):
    return (torch.randn(1, 16, cfg.input_feat_per_channel),), dict(decoder_input_ids=torch.tensor([[1, 5, 6]]))


def _ast(cfg):
    return (torch.randn(1, cfg.max_length, cfg.num_mel_bins),), {}


def _clap(cfg):
    return (torch.randn(1, 1, 64, cfg.num_mel_bins),), {}


def _w2v_bert(cfg):
    return (torch.randn(1, 20, cfg.feature_projection_input_dim),), {}


def _patchtst(cfg):
    return (torch.randn(1, cfg.context_length, cfg.num_input_channels),), {}


def _clip(cfg):
    ids, mask = _ids()
    return (ids,), dict(pixel_values=torch.randn(1, 3, 32, 32), attention_mask=mask)


def _siglip(cfg):
    ids, _ = _ids()
    return (ids,), dict(pixel_values=torch.randn(1, 3, 32, 32))


def _owlvit(cfg):
    ids, mask = _ids()
    return (ids,), dict(pixel_values=torch.randn(1, 3, 32, 32), attention_mask=mask)


def _vilt(cfg):
    ids, mask = _ids()
    return (ids[:1],), dict(attention_mask=mask[:1], pixel_values=torch.randn(1, 3, 32, 32),
                            pixel_mask=torch.ones(1, 32, 32, dtype=torch.long))


def _encodec(cfg):
    return (torch.randn(1, 1, 320),), {}


_VIT = dict(image_size=32, patch_size=8, num_channels=3)
_W2V = dict(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
            conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=8,
            num_conv_pos_embedding_groups=4)
_RESNET = dict(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic")
_DETR = dict(use_timm_backbone=False, use_pretrained_backbone=False, backbone=None,
             backbone_config=dict(model_type="resnet", **_RESNET, out_features=["stage2"]),
             d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
             decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, num_queries=8,
             num_labels=5)

ZOO: list[Entry] = [
    # encoders
    *[Entry(n.lower().removesuffix("model"), "encoder", n, "text") for n in (
        "BertModel", "RobertaModel", "AlbertModel", "ElectraModel", "DebertaModel",
        "DebertaV2Model", "MPNetModel", "ConvBertModel", "RoFormerModel", "SqueezeBertModel",
        "RemBertModel", "ModernBertModel", "EsmModel", "NystromformerModel")],
    Entry("distilbert", "encoder", "DistilBertModel", "text", dict(dim=32, n_layers=2, n_heads=4, hidden_dim=64)),
    Entry("xlm", "encoder", "XLMModel", "text", dict(n_words=V, emb_dim=32, n_layers=1, n_heads=4)),
    Entry("fnet", "encoder", "FNetModel", "ids"),
    Entry("funnel", "encoder", "FunnelModel", "text", dict(block_sizes=[1, 1], d_model=32, n_head=4, d_head=8,
                                                             d_inner=64)),
    Entry("bigbird", "encoder", "BigBirdModel", "text", dict(attention_type="original_full")),
    Entry("canine", "encoder", "CanineModel", "text", dict(downsampling_rate=2, local_transformer_stride=4,
                                                           num_hash_buckets=64)),
    # task heads on an encoder
    *[Entry(n.lower().removeprefix("bertfor"), "encoder head", n, "text") for n in (
        "BertForSequenceClassification", "BertForMaskedLM")],
    Entry("multiplechoice", "encoder head", "BertForMultipleChoice", "choice"),
    # decoders (one forward, no cache)
    *[Entry(n.lower().removesuffix("forcausallm").removesuffix("lmheadmodel"), "decoder", n, "text") for n in (
        "GPT2LMHeadModel", "LlamaForCausalLM", "XGLMForCausalLM", "BioGptForCausalLM", "OPTForCausalLM")],
    Entry("gptneo", "decoder", "GPTNeoForCausalLM", "text", dict(num_layers=2, window_size=4,
                                                                attention_types=[[["global", "local"], 1]])),
    Entry("gptj", "decoder", "GPTJForCausalLM", "text", dict(rotary_dim=4)),
    # encoder-decoders, one forward with decoder_input_ids
    *[Entry(n.lower().removesuffix("model").removesuffix("mt"), "encoder-decoder", n, "seq2seq") for n in (
        "BartModel", "T5Model", "LongT5Model", "PegasusModel", "M2M100Model",
        "SwitchTransformersModel")],
    # vision backbones
    Entry("vit", "vision", "ViTModel", "image", _VIT),
    Entry("deit", "vision", "DeiTModel", "image", _VIT),
    Entry("beit", "vision", "BeitModel", "image", _VIT),
    Entry("dinov2", "vision", "Dinov2Model", "image", _VIT),
    Entry("vit_mae", "vision", "ViTMAEModel", "image", _VIT),
    Entry("siglip_vision", "vision", "SiglipVisionModel", "image", _VIT),
    Entry("clip_vision", "vision", "CLIPVisionModel", "image", _VIT),
    Entry("resnet", "vision", "ResNetModel", "image", _RESNET, common=False),
    Entry("regnet", "vision", "RegNetModel", "image", dict(embedding_size=8, hidden_sizes=[8, 16],
                                                          depths=[1, 1], groups_width=8), common=False),
    Entry("bit", "vision", "BitModel", "image", dict(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1],
                                                    num_groups=4), common=False),
    Entry("convnext", "vision", "ConvNextModel", "image", dict(hidden_sizes=[8, 16], depths=[1, 1],
                                                              num_stages=2), common=False),
    Entry("convnextv2", "vision", "ConvNextV2Model", "image", dict(hidden_sizes=[8, 16], depths=[1, 1],
                                                                  num_stages=2), common=False),
    Entry("mobilenet_v2", "vision", "MobileNetV2Model", "image", dict(depth_multiplier=0.25), common=False),
    Entry("efficientnet", "vision", "EfficientNetModel", "image", dict(
        width_coefficient=0.25, depth_coefficient=0.25, hidden_dim=320, image_size=32), common=False),
    Entry("swin", "vision", "SwinModel", "image", dict(embed_dim=16, depths=[1, 1], num_heads=[2, 2],
                                                      window_size=4, image_size=32, patch_size=4),
          common=False),
    Entry("swinv2", "vision", "Swinv2Model", "image", dict(embed_dim=16, depths=[1, 1], num_heads=[2, 2],
                                                          window_size=4, image_size=32, patch_size=4),
          common=False),
    Entry("focalnet", "vision", "FocalNetModel", "image", dict(embed_dim=16, depths=[1, 1], image_size=32,
                                                              patch_size=4), common=False),
    Entry("levit", "vision", "LevitModel", "image", dict(image_size=32, hidden_sizes=[16, 32, 48],
                                                        num_attention_heads=[1, 2, 3], depths=[1, 1, 1],
                                                        key_dim=[8, 8, 8]), common=False),
    Entry("poolformer", "vision", "PoolFormerModel", "image", dict(hidden_sizes=[8, 16, 16, 32],
                                                                  depths=[1, 1, 1, 1]), common=False),
    Entry("hiera", "vision", "HieraModel", "image64", dict(embed_dim=16, depths=[1, 1, 1, 1],
                                                          num_heads=[1, 1, 2, 2], image_size=[64, 64],
                                                          masked_unit_size=[8, 8]), common=False),
    # audio
    *[Entry(n.lower().removesuffix("model"), "audio", n, "wave", _W2V, common=False) for n in (
        "Wav2Vec2Model", "WavLMModel", "SEWModel", "Wav2Vec2ConformerModel")],
    Entry("whisper", "audio", "WhisperModel", _whisper, dict(num_mel_bins=8, max_source_positions=16,
                                                            max_target_positions=16)),
    Entry("speech_to_text", "audio", "Speech2TextModel", _speech2text, dict(
        input_feat_per_channel=8, conv_channels=16, max_source_positions=64, max_target_positions=64)),
    Entry("ast", "audio", "ASTModel", _ast, dict(num_mel_bins=16, max_length=32, patch_size=8)),
    Entry("wav2vec2_bert", "audio", "Wav2Vec2BertModel", _w2v_bert, dict(
        feature_projection_input_dim=16, conv_depthwise_kernel_size=3)),
    Entry("encodec", "audio", "EncodecModel", _encodec, dict(
        num_filters=4, hidden_size=16, codebook_size=32, codebook_dim=16, upsampling_ratios=[4, 2],
        num_lstm_layers=1), common=False),
    Entry("patchtst", "time series", "PatchTSTModel", _patchtst, dict(
        num_input_channels=2, context_length=32, patch_length=8, patch_stride=8, d_model=16,
        num_attention_heads=2, num_hidden_layers=1, ffn_dim=32), common=False),
    # multimodal
    Entry("clip", "multimodal", "CLIPModel", _clip, dict(
        text_config=dict(vocab_size=V, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                         intermediate_size=64, max_position_embeddings=64, bos_token_id=1, eos_token_id=2),
        vision_config=dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64,
                           **_VIT), projection_dim=16), common=False),
    Entry("siglip", "multimodal", "SiglipModel", _siglip, dict(
        text_config=dict(vocab_size=V, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                         intermediate_size=64, max_position_embeddings=64),
        vision_config=dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64,
                           **_VIT)), common=False),
    Entry("vilt", "multimodal", "ViltModel", _vilt, dict(**_VIT, max_image_length=-1)),
    # detection, segmentation, depth
    Entry("segformer_seg", "detection/segmentation", "SegformerForSemanticSegmentation", "image", dict(
        num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[8, 16], num_attention_heads=[1, 2],
        patch_sizes=[7, 3], strides=[4, 2], decoder_hidden_size=16, num_labels=3), common=False),
    Entry("mobilevit_seg", "detection/segmentation", "MobileViTForSemanticSegmentation", "image", dict(
        image_size=32, hidden_sizes=[16, 16, 16], neck_hidden_sizes=[8, 8, 16, 16, 16, 16, 32],
        aspp_out_channels=16, num_labels=3), common=False),
    Entry("beit_seg", "detection/segmentation", "BeitForSemanticSegmentation", "image", dict(
        **_VIT, num_hidden_layers=4, out_indices=[1, 2, 3, 4], auxiliary_channels=16, pool_scales=[1, 2], num_labels=3,
        use_auxiliary_head=False)),
    Entry("dpt_depth", "detection/segmentation", "DPTForDepthEstimation", "image", dict(
        **_VIT, neck_hidden_sizes=[8, 8, 16, 16], fusion_hidden_size=16, num_hidden_layers=4, backbone_out_indices=[0, 1, 2, 3],
        reassemble_factors=[4, 2, 1, 0.5])),
    Entry("glpn_depth", "detection/segmentation", "GLPNForDepthEstimation", "image", dict(
        num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[8, 16], num_attention_heads=[1, 2],
        patch_sizes=[7, 3], strides=[4, 2], decoder_hidden_size=16), common=False),
    Entry("yolos_det", "detection/segmentation", "YolosForObjectDetection", "image", dict(
        image_size=[32, 32], patch_size=8, num_detection_tokens=5, num_labels=5)),
    Entry("detr_det", "detection/segmentation", "DetrForObjectDetection", "image64", _DETR, common=False),
    Entry("upernet_seg", "detection/segmentation", "UperNetForSemanticSegmentation", "image", dict(
        backbone_config=dict(model_type="convnext", hidden_sizes=[8, 16, 16, 32], depths=[1, 1, 1, 1],
                             out_features=["stage1", "stage2", "stage3", "stage4"]),
        hidden_size=16, auxiliary_in_channels=16, auxiliary_channels=8, use_auxiliary_head=False,
        pool_scales=[1, 2], num_labels=3), common=False),
]

ZOO += TORCHAUDIO + DIFFUSERS
BY_NAME = {e.name: e for e in ZOO}
assert len(BY_NAME) == len(ZOO), "zoo names must be unique"
