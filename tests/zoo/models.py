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


def _longformer(cfg):
    """16 tokens with a window of 4: the sliding-window chunk path runs (and global tokens)."""
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(3, V, (2, 16), generator=g)
    mask = torch.ones(2, 16, dtype=torch.long)
    mask[1, 13:] = 0
    glob = torch.zeros(2, 16, dtype=torch.long)
    glob[:, 0] = 1
    glob[1, 5] = 1
    return (ids,), dict(attention_mask=mask, global_attention_mask=glob)


def _led(cfg):
    """Local attention only (no global tokens): the sliding-window chunks, whose strided
    views of non-contiguous views once exported silently wrong, are what is compared."""
    (ids,), kwargs = _longformer(cfg)
    return (ids,), dict(attention_mask=kwargs["attention_mask"], decoder_input_ids=ids[:, :4])


def _wave3(cfg):
    return (torch.randn(1, 1, 320, generator=torch.Generator().manual_seed(1)),), {}


def _vits(cfg):
    ids, mask = _ids()
    return (ids[:1],), dict(attention_mask=mask[:1])


def _t2s(cfg):
    ids, mask = _ids()
    g = torch.Generator().manual_seed(1)
    return (ids[:1],), dict(decoder_input_values=torch.randn(1, 6, cfg.num_mel_bins, generator=g),
                            speaker_embeddings=torch.randn(1, cfg.speaker_embedding_dim, generator=g))


def _s2t(cfg):
    return (torch.randn(1, 800, generator=torch.Generator().manual_seed(1)),), dict(
        decoder_input_ids=torch.tensor([[1, 5, 6]]))


def _mel(cfg):
    return (torch.randn(1, 8, cfg.model_in_dim, generator=torch.Generator().manual_seed(1)),), {}


def _univnet(cfg):
    g = torch.Generator().manual_seed(1)
    return (torch.randn(1, 8, cfg.num_mel_bins, generator=g),), dict(
        noise_sequence=torch.randn(1, 8, cfg.model_in_channels, generator=g))


def _musicgen(cfg):
    ids, _ = _ids()
    return (ids[: cfg.num_codebooks, :5] % cfg.vocab_size,), {}  # one sequence of num_codebooks streams


def _layoutlm(cfg):
    ids, mask = _ids()
    x0 = torch.arange(7) * 100
    bbox = torch.stack([x0, x0 // 2, x0 + 50, x0 // 2 + 30], -1)[None].expand(2, 7, 4).contiguous()
    return (ids,), dict(bbox=bbox, attention_mask=mask)


def _markuplm(cfg):
    ids, mask = _ids()
    g = torch.Generator().manual_seed(1)
    tags = torch.randint(0, 200, (2, 7, cfg.max_depth), generator=g)
    subs = torch.randint(0, 500, (2, 7, cfg.max_depth), generator=g)
    return (ids,), dict(xpath_tags_seq=tags, xpath_subs_seq=subs, attention_mask=mask)


def _luke(cfg):
    ids, mask = _ids()
    ents = torch.tensor([[5, 6], [7, 0]])
    emask = torch.tensor([[1, 1], [1, 0]])
    epos = torch.tensor([[[1, 2, -1], [3, -1, -1]], [[0, 1, 2], [-1, -1, -1]]])
    return (ids,), dict(attention_mask=mask, entity_ids=ents, entity_attention_mask=emask,
                        entity_position_ids=epos)


def _perceiver(cfg):
    return (torch.randn(1, 10, cfg.d_model, generator=torch.Generator().manual_seed(1)),), {}


def _video(frames):
    def make(cfg):
        return (torch.randn(1, frames, 3, 32, 32, generator=torch.Generator().manual_seed(1)),), {}
    return make


def _series(cfg):
    g = torch.Generator().manual_seed(1)
    past = cfg.context_length + max(cfg.lags_sequence)
    return (), dict(past_values=torch.randn(1, past, generator=g),
                    past_time_features=torch.randn(1, past, cfg.num_time_features, generator=g),
                    past_observed_mask=torch.ones(1, past),
                    future_values=torch.randn(1, cfg.prediction_length, generator=g),
                    future_time_features=torch.randn(1, cfg.prediction_length, cfg.num_time_features, generator=g))


def _patchtsmixer(cfg):
    return (torch.randn(1, cfg.context_length, cfg.num_input_channels,
                        generator=torch.Generator().manual_seed(1)),), {}


def _sam(cfg):
    g = torch.Generator().manual_seed(1)
    return (torch.randn(1, 3, 64, 64, generator=g),), dict(input_points=torch.tensor([[[[20.0, 30.0]]]]))


def _vitmatte(cfg):
    return (torch.randn(1, 4, 32, 32, generator=torch.Generator().manual_seed(1)),), {}


def _perturbed(model: str, inputs: str, config: dict[str, Any]):
    """A builder adding noise to every weight: where the class initializes a head to zeros
    (RT-DETR's query scores), every score ties and top-k's choice among equals is arbitrary."""
    def make():
        m, args, kwargs = build(Entry(model, "", model, inputs, config, common=False))
        g = torch.Generator().manual_seed(3)
        with torch.no_grad():
            for p in m.parameters():
                p.add_(torch.randn(p.shape, generator=g) * 0.05)
        return m, args, kwargs
    return make


_SERIES = dict(use_cache=False, prediction_length=4, context_length=8, lags_sequence=[1, 2, 3], num_time_features=1,
               d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
               decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32)
_SWIN64 = dict(model_type="swin", embed_dim=16, depths=[1, 1, 1, 1], num_heads=[1, 1, 2, 2], window_size=2,
               image_size=64, out_features=["stage1", "stage2", "stage3", "stage4"])

MORE: list[Entry] = [
    # encoders
    Entry("longformer", "encoder", "LongformerModel", _longformer, dict(attention_window=4)),
    Entry("mobilebert", "encoder", "MobileBertModel", "text", dict(
        embedding_size=16, intra_bottleneck_size=16, true_hidden_size=16, num_feedforward_networks=2)),
    Entry("xlnet", "encoder", "XLNetModel", "text", dict(d_inner=64)),
    Entry("ibert", "encoder", "IBertModel", "text", dict(quant_mode=True)),
    Entry("layoutlm", "encoder", "LayoutLMModel", _layoutlm),
    Entry("markuplm", "encoder", "MarkupLMModel", _markuplm, dict(max_depth=4, xpath_unit_hidden_size=8)),
    Entry("luke", "encoder", "LukeModel", _luke, dict(entity_vocab_size=16, entity_emb_size=16)),
    Entry("data2vec_text", "encoder", "Data2VecTextModel", "text"),
    Entry("ernie", "encoder", "ErnieModel", "text", dict(use_task_id=True)),
    Entry("perceiver", "encoder", "PerceiverModel", _perceiver, dict(
        num_latents=8, d_latents=32, d_model=16, num_blocks=1, num_self_attends_per_block=1,
        num_self_attention_heads=4, num_cross_attention_heads=1), common=False),
    # encoder-decoders
    Entry("led", "encoder-decoder", "LEDModel", _led, dict(
        attention_window=4, max_encoder_position_embeddings=64, max_decoder_position_embeddings=64)),
    # decoders
    Entry("musicgen", "decoder", "MusicgenForCausalLM", _musicgen, dict(
        vocab_size=32, hidden_size=32, num_hidden_layers=1, ffn_dim=64, num_attention_heads=4,
        num_codebooks=2, pad_token_id=32, bos_token_id=32, max_position_embeddings=64, use_cache=False), common=False),
    # vision
    Entry("mobilevitv2", "vision", "MobileViTV2Model", "image64", dict(
        image_size=64, width_multiplier=0.25, n_attn_blocks=[1, 1, 1]), common=False),
    Entry("pvt_v2", "vision", "PvtV2Model", "image", dict(
        num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[8, 16], num_attention_heads=[1, 2],
        patch_sizes=[7, 3], strides=[4, 2], mlp_ratios=[2, 2]), common=False),
    Entry("cvt", "vision", "CvtModel", "image", dict(
        embed_dim=[8, 16, 32], num_heads=[1, 2, 4], depth=[1, 2, 3], drop_path_rate=[0.0, 0.0, 0.0]),
        common=False),
    Entry("swiftformer", "vision", "SwiftFormerModel", "image", dict(
        depths=[1, 1, 1, 1], embed_dims=[8, 16, 16, 32], image_size=32), common=False),
    Entry("vitdet", "vision", "VitDetModel", "image", dict(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4, mlp_ratio=2, image_size=32, patch_size=8,
        pretrain_image_size=32, window_size=2, window_block_indices=[0], use_relative_position_embeddings=True),
        common=False),
    # audio
    *[Entry(n.lower().removesuffix("model"), "audio", n, "wave", _W2V, common=False) for n in (
        "HubertModel", "UniSpeechModel", "UniSpeechSatModel")],
    Entry("sew_d", "audio", "SEWDModel", "wave", dict(_W2V, position_buckets=16, max_position_embeddings=64,
                                                      squeeze_factor=2), common=False),
    Entry("data2vec_audio", "audio", "Data2VecAudioModel", "wave", dict(
        _W2V, num_conv_pos_embeddings=2, conv_pos_kernel_size=5), common=False),
    Entry("mimi", "audio", "MimiModel", _wave3, dict(
        sampling_rate=800, hidden_size=32, num_filters=4, upsampling_ratios=[4, 2], upsample_groups=32,
        codebook_size=32, codebook_dim=16, vector_quantization_hidden_dimension=16, num_quantizers=4,
        num_hidden_layers=1, intermediate_size=64, num_attention_heads=4, num_key_value_heads=4,
        sliding_window=8), common=False),
    Entry("dac", "audio", "DacModel", _wave3, dict(
        encoder_hidden_size=4, downsampling_ratios=[2, 4], decoder_hidden_size=16, n_codebooks=2,
        codebook_size=32, codebook_dim=4, hidden_size=16), common=False),
    # speech synthesis
    Entry("vits", "speech synthesis", "VitsModel", _vits, dict(
        vocab_size=V, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, ffn_dim=32, flow_size=8,
        spectrogram_bins=17, upsample_initial_channel=16, upsample_rates=[2, 2], upsample_kernel_sizes=[4, 4],
        resblock_kernel_sizes=[3], resblock_dilation_sizes=[[1, 3]], duration_predictor_filter_channels=16,
        duration_predictor_num_flows=1, prior_encoder_num_flows=1, prior_encoder_num_wavenet_layers=1,
        posterior_encoder_num_wavenet_layers=1), common=False),
    Entry("fastspeech2_conformer", "speech synthesis", "FastSpeech2ConformerModel", "ids", dict(
        vocab_size=V, hidden_size=16, num_mel_bins=8, encoder_layers=1, decoder_layers=1, encoder_linear_units=32,
        decoder_linear_units=32, speech_decoder_postnet_layers=1, speech_decoder_postnet_units=16,
        encoder_kernel_size=3, decoder_kernel_size=3, duration_predictor_layers=1, duration_predictor_channels=16,
        energy_predictor_layers=1, energy_predictor_channels=16, pitch_predictor_layers=1,
        pitch_predictor_channels=16), common=False),
    Entry("speecht5_tts", "speech synthesis", "SpeechT5ForTextToSpeech", _t2s, dict(
        vocab_size=V, hidden_size=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, num_mel_bins=8,
        speech_decoder_prenet_units=16, speaker_embedding_dim=8, speech_decoder_postnet_layers=1,
        speech_decoder_postnet_units=16, max_speech_positions=64, max_text_positions=64,
        encoder_max_relative_position=16, use_cache=False), common=False),
    Entry("speecht5_asr", "speech synthesis", "SpeechT5ForSpeechToText", _s2t, dict(
        vocab_size=V, hidden_size=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, conv_dim=(16, 16), conv_stride=(5, 2),
        conv_kernel=(10, 3), num_conv_pos_embeddings=8, num_conv_pos_embedding_groups=4,
        max_speech_positions=256, max_text_positions=64, encoder_max_relative_position=16, use_cache=False), common=False),
    Entry("speecht5_hifigan", "speech synthesis", "SpeechT5HifiGan", _mel, dict(
        model_in_dim=8, upsample_initial_channel=16, upsample_rates=[2, 2], upsample_kernel_sizes=[4, 4],
        resblock_kernel_sizes=[3], resblock_dilation_sizes=[[1, 3]]), common=False),
    Entry("univnet", "speech synthesis", "UnivNetModel", _univnet, dict(
        model_in_channels=8, model_hidden_channels=8, num_mel_bins=8, resblock_kernel_sizes=[3, 3],
        resblock_stride_sizes=[2, 2], resblock_dilation_sizes=[[1, 3], [1, 3]], kernel_predictor_num_blocks=1,
        kernel_predictor_hidden_channels=8), common=False),
    # video
    Entry("videomae", "video", "VideoMAEModel", _video(4), dict(_VIT, num_frames=4, tubelet_size=2)),
    Entry("timesformer", "video", "TimesformerModel", _video(2), dict(_VIT, num_frames=2)),
    Entry("vivit", "video", "VivitModel", _video(4), dict(image_size=32, num_frames=4, tubelet_size=[2, 8, 8])),
    # time series
    Entry("time_series_transformer", "time series", "TimeSeriesTransformerModel", _series, _SERIES, common=False),
    Entry("informer", "time series", "InformerModel", _series, _SERIES, common=False),
    Entry("autoformer", "time series", "AutoformerModel", _series, dict(_SERIES, label_length=4), common=False),
    Entry("patchtsmixer", "time series", "PatchTSMixerModel", _patchtsmixer, dict(
        context_length=32, patch_length=8, patch_stride=8, num_input_channels=2, d_model=16, num_layers=1),
        common=False),
    # detection, segmentation, depth
    Entry("conditional_detr", "detection/segmentation", "ConditionalDetrModel", "image64", _DETR, common=False),
    Entry("table_transformer", "detection/segmentation", "TableTransformerModel", "image64", _DETR, common=False),
    Entry("deformable_detr", "detection/segmentation", "DeformableDetrModel", "image64", dict(
        _DETR, backbone_config=dict(model_type="resnet", **_RESNET, out_features=["stage1", "stage2"]),
        num_feature_levels=2, encoder_n_points=2, decoder_n_points=2, disable_custom_kernels=True),
        common=False),
    Entry("rt_detr", "detection/segmentation", "RTDetrModel", make=_perturbed("RTDetrModel", "image64", dict(
        backbone_config=dict(model_type="rt_detr_resnet", embedding_size=8, hidden_sizes=[8, 16, 32, 32],
                             depths=[1, 1, 1, 1], layer_type="basic", out_features=["stage2", "stage3", "stage4"]),
        encoder_in_channels=[16, 32, 32], encoder_hidden_dim=16, encoder_ffn_dim=32, d_model=16,
        decoder_in_channels=[16, 16, 16], decoder_ffn_dim=32, num_queries=8, decoder_layers=1,
        encoder_attention_heads=2, decoder_attention_heads=2, decoder_n_points=2, num_labels=5,
        num_denoising=0))),
    Entry("maskformer", "detection/segmentation", "MaskFormerModel", "image64", dict(
        backbone_config=_SWIN64, decoder_config=dict(
            model_type="detr", d_model=32, decoder_layers=1, decoder_attention_heads=4, decoder_ffn_dim=64,
            encoder_layers=1, encoder_attention_heads=4, encoder_ffn_dim=64),
        fpn_feature_size=32, mask_feature_size=32, num_queries=8), common=False),
    Entry("mask2former", "detection/segmentation", "Mask2FormerModel", "image64", dict(
        backbone_config=_SWIN64, feature_size=32, mask_feature_size=32, hidden_dim=32, encoder_feedforward_dim=64,
        dim_feedforward=64, num_queries=8, encoder_layers=1, decoder_layers=2, num_attention_heads=4,
        common_stride=4), common=False),
    Entry("sam", "detection/segmentation", "SamModel", _sam, dict(
        vision_config=dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, mlp_dim=64, image_size=64,
                           patch_size=8, output_channels=16, window_size=4, global_attn_indexes=[1],
                           num_pos_feats=8),
        prompt_encoder_config=dict(hidden_size=16, image_size=64, patch_size=8, mask_input_channels=4),
        mask_decoder_config=dict(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, mlp_dim=32,
                                 iou_head_hidden_dim=16)), common=False),
    Entry("zoedepth", "detection/segmentation", "ZoeDepthForDepthEstimation", "image", dict(
        backbone_config=dict(model_type="beit", **_VIT, hidden_size=32, num_hidden_layers=4, num_attention_heads=4,
                             intermediate_size=64, out_indices=[1, 2, 3, 4], use_relative_position_bias=True,
                             reshape_hidden_states=False),
        neck_hidden_sizes=[8, 8, 16, 16], fusion_hidden_size=16, bottleneck_features=16, num_attractors=[4, 4, 4, 4],
        bin_embedding_dim=16, num_relative_features=8, patch_size=8,
        bin_configurations=[dict(n_bins=8, min_depth=1e-3, max_depth=10.0, name="nyu")]), common=False),
    Entry("depth_anything", "detection/segmentation", "DepthAnythingForDepthEstimation", "image", dict(
        backbone_config=dict(model_type="dinov2", **_VIT, hidden_size=32, num_hidden_layers=4, num_attention_heads=4,
                             out_indices=[1, 2, 3, 4], reshape_hidden_states=False),
        reassemble_hidden_size=32, patch_size=8, neck_hidden_sizes=[8, 8, 16, 16], fusion_hidden_size=16,
        head_hidden_size=8), common=False),
    Entry("swin2sr", "detection/segmentation", "Swin2SRForImageSuperResolution", "image16", dict(
        embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4, image_size=16, patch_size=1, upscale=2,
        upsampler="pixelshuffle"), common=False),
    Entry("vitmatte", "detection/segmentation", "VitMatteForImageMatting", _vitmatte, dict(
        backbone_config=dict(model_type="vitdet", hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                             mlp_ratio=2, image_size=32, pretrain_image_size=32, patch_size=16, num_channels=4,
                             out_features=["stage2"]),
        hidden_size=32, convstream_hidden_sizes=[8, 16, 32], fusion_hidden_sizes=[32, 16, 8, 8]), common=False),
    Entry("superpoint", "detection/segmentation", "SuperPointForKeypointDetection",  # perturbed: its scores
          make=_perturbed("SuperPointForKeypointDetection", "image", dict(  # all tie at initialisation
              encoder_hidden_sizes=[8, 8, 16, 16], decoder_hidden_size=16, descriptor_decoder_dim=16,
              max_keypoints=8))),
]
_GROUPS = list(dict.fromkeys([e.group for e in ZOO] + [e.group for e in MORE]))
ZOO = sorted(ZOO + MORE, key=lambda e: _GROUPS.index(e.group))  # each group's new classes after its old ones
ZOO += TORCHAUDIO + DIFFUSERS
BY_NAME = {e.name: e for e in ZOO}
assert len(BY_NAME) == len(ZOO), "zoo names must be unique"
