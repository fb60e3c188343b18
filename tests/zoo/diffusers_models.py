"""diffusers' model classes in the zoo (group ``diffusers``).

Each builder imports diffusers itself (importing the zoo's list must not), makes the class
from a tiny config with random weights (block widths 8 to 32, one layer per block, 8x8 to
32x32 samples) so that both frontends and the tract check take a few seconds, and returns
the model in eval mode with example inputs; ``return_dict=False`` makes forward return
tuples instead of output dataclasses. Timesteps are tensors, as a sampling loop passes them.
"""

from __future__ import annotations

import torch

from .entry import Entry

CROSS = 16  # width of the text embeddings the cross-attention models take


def _randn(*shape: int) -> torch.Tensor:
    """Random inputs, drawn after the weights from the seed that ``models.build`` sets."""
    return torch.randn(*shape)


def _t(value: float = 10.0) -> torch.Tensor:
    """A timestep of a batch of one, as a float tensor."""
    return torch.tensor([value])


def _unet2d():
    """A pixel-space DDPM UNet with one attention stage."""
    from diffusers import UNet2DModel

    m = UNet2DModel(sample_size=16, in_channels=3, out_channels=3, layers_per_block=1,
                    block_out_channels=(8, 16), norm_num_groups=4, attention_head_dim=8,
                    down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                    up_block_types=("AttnUpBlock2D", "UpBlock2D"))
    return m.eval(), (_randn(1, 3, 16, 16), _t()), dict(return_dict=False)


def _cond_unet_kw() -> dict:
    """The latent UNet shape shared by UNet2DConditionModel and ControlNetModel."""
    return dict(in_channels=4, block_out_channels=(8, 16), layers_per_block=1, norm_num_groups=4,
                cross_attention_dim=CROSS, attention_head_dim=4,
                down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"))


def _unet2d_cond():
    """Stable Diffusion's latent UNet: text cross-attention, a tensor timestep."""
    from diffusers import UNet2DConditionModel

    m = UNet2DConditionModel(sample_size=16, out_channels=4,
                             up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), **_cond_unet_kw())
    args = (_randn(1, 4, 16, 16), _t(), _randn(1, 7, CROSS))
    return m.eval(), args, dict(return_dict=False)


def _controlnet():
    """A ControlNet over the same latent UNet, its hint image at twice the latent size."""
    from diffusers import ControlNetModel

    m = ControlNetModel(conditioning_embedding_out_channels=(4, 8), **_cond_unet_kw())
    args = (_randn(1, 4, 16, 16), _t(), _randn(1, 7, CROSS), _randn(1, 3, 32, 32))
    return m.eval(), args, dict(return_dict=False)


def _vae_kw() -> dict:
    return dict(in_channels=3, out_channels=3, block_out_channels=(8, 16), layers_per_block=1,
                latent_channels=4, norm_num_groups=4, sample_size=16,
                down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2)


def _autoencoder_kl():
    """Encode to the posterior's mode and decode (sample_posterior=False: no draw)."""
    from diffusers import AutoencoderKL

    m = AutoencoderKL(**_vae_kw())
    return m.eval(), (_randn(1, 3, 16, 16),), dict(sample_posterior=False, return_dict=False)


def _vq():
    """Encode, quantize to the nearest codebook vector, decode."""
    from diffusers import VQModel

    m = VQModel(num_vq_embeddings=16, **_vae_kw())
    return m.eval(), (_randn(1, 3, 16, 16),), dict(return_dict=False)


def _autoencoder_tiny():
    """TAESD: encode, round the latents to bytes and back, decode."""
    from diffusers import AutoencoderTiny

    m = AutoencoderTiny(encoder_block_out_channels=(8, 8), decoder_block_out_channels=(8, 8),
                        num_encoder_blocks=(1, 1), num_decoder_blocks=(1, 1))
    return m.eval(), (_randn(1, 3, 16, 16),), dict(return_dict=False)


def _unet1d():
    """Dance Diffusion's waveform UNet with Fourier time features."""
    from diffusers import UNet1DModel

    m = UNet1DModel(sample_size=32, in_channels=2, out_channels=2, extra_in_channels=16, time_embedding_dim=16,
                    block_out_channels=(32, 32), norm_num_groups=4,
                    down_block_types=("DownBlock1DNoSkip", "AttnDownBlock1D"),
                    up_block_types=("AttnUpBlock1D", "UpBlock1DNoSkip"))
    return m.eval(), (_randn(1, 2, 32), _t()), dict(return_dict=False)


def _transformer2d():
    """The spatial transformer of SD's UNet on its own: continuous input, cross-attention."""
    from diffusers import Transformer2DModel

    m = Transformer2DModel(num_attention_heads=2, attention_head_dim=4, in_channels=8, num_layers=1,
                           norm_num_groups=4, cross_attention_dim=CROSS)
    return m.eval(), (_randn(1, 8, 8, 8),), dict(encoder_hidden_states=_randn(1, 7, CROSS),
                                                   return_dict=False)


def _dit():
    """DiT: patchified latents, adaLN-Zero from timestep and class label."""
    from diffusers import DiTTransformer2DModel

    m = DiTTransformer2DModel(num_attention_heads=2, attention_head_dim=8, in_channels=4, num_layers=1,
                              sample_size=8, patch_size=2, num_embeds_ada_norm=10)
    args = (_randn(1, 4, 8, 8), _t(), torch.tensor([3]))
    return m.eval(), args, dict(return_dict=False)


def _pixart():
    """PixArt-alpha: DiT blocks with caption cross-attention and a single adaLN table."""
    from diffusers import PixArtTransformer2DModel

    m = PixArtTransformer2DModel(num_attention_heads=2, attention_head_dim=8, in_channels=4,
                                 out_channels=8, num_layers=1, cross_attention_dim=16,
                                 caption_channels=CROSS, sample_size=8, patch_size=2)
    kw = dict(encoder_hidden_states=_randn(1, 7, CROSS), timestep=_t(),
              added_cond_kwargs=dict(resolution=None, aspect_ratio=None), return_dict=False)
    return m.eval(), (_randn(1, 4, 8, 8),), kw


def _sd3():
    """SD3's MMDiT: joint image-text attention, pooled text in the timestep embedding."""
    from diffusers import SD3Transformer2DModel

    m = SD3Transformer2DModel(sample_size=8, patch_size=2, in_channels=4, num_layers=1,
                              attention_head_dim=8, num_attention_heads=2, joint_attention_dim=CROSS,
                              caption_projection_dim=16, pooled_projection_dim=8, out_channels=4,
                              pos_embed_max_size=8)
    kw = dict(encoder_hidden_states=_randn(1, 7, CROSS), pooled_projections=_randn(1, 8),
              timestep=_t(), return_dict=False)
    return m.eval(), (_randn(1, 4, 8, 8),), kw


def _flux():
    """Flux: double- and single-stream blocks with 3-axis rotary position ids."""
    from diffusers import FluxTransformer2DModel

    m = FluxTransformer2DModel(patch_size=1, in_channels=8, num_layers=1, num_single_layers=1,
                               attention_head_dim=8, num_attention_heads=2, joint_attention_dim=CROSS,
                               pooled_projection_dim=8, axes_dims_rope=(2, 2, 4))
    n, t = 16, 7
    img_ids = torch.stack(torch.meshgrid(torch.zeros(1), torch.arange(4.0), torch.arange(4.0),
                                         indexing="ij"), -1).reshape(n, 3)
    kw = dict(encoder_hidden_states=_randn(1, t, CROSS), pooled_projections=_randn(1, 8), timestep=_t(0.5),
              img_ids=img_ids, txt_ids=torch.zeros(t, 3), return_dict=False)
    return m.eval(), (_randn(1, n, 8),), kw


def _unet3d():
    """ModelScope's text-to-video UNet: spatial blocks plus temporal attention over frames."""
    from diffusers import UNet3DConditionModel

    m = UNet3DConditionModel(sample_size=8, in_channels=4, out_channels=4, block_out_channels=(8,),
                             layers_per_block=1, norm_num_groups=4, cross_attention_dim=CROSS,
                             attention_head_dim=4, down_block_types=("CrossAttnDownBlock3D",),
                             up_block_types=("CrossAttnUpBlock3D",))
    args = (_randn(1, 4, 2, 8, 8), _t(), _randn(1, 7, CROSS))
    return m.eval(), args, dict(return_dict=False)


def _unet_svd():
    """Stable Video Diffusion's UNet (its norms have 32 groups, hence the 32-wide blocks)."""
    from diffusers import UNetSpatioTemporalConditionModel

    m = UNetSpatioTemporalConditionModel(
        sample_size=8, in_channels=8, out_channels=4, block_out_channels=(32,),
        down_block_types=("CrossAttnDownBlockSpatioTemporal",), up_block_types=("CrossAttnUpBlockSpatioTemporal",),
        addition_time_embed_dim=4, projection_class_embeddings_input_dim=12, layers_per_block=1,
        cross_attention_dim=CROSS, num_attention_heads=(2,), num_frames=2)
    args = (_randn(1, 2, 8, 8, 8), _t(), _randn(1, 1, CROSS), torch.tensor([[6.0, 127.0, 0.02]]))
    return m.eval(), args, dict(return_dict=False)


def _vae_temporal():
    """SVD's VAE: a 2D encoder and a decoder with temporal mixing over the frames (its
    norms have 32 groups: one 32-wide level)."""
    from diffusers import AutoencoderKLTemporalDecoder

    m = AutoencoderKLTemporalDecoder(block_out_channels=(32,), layers_per_block=1)
    return m.eval(), (_randn(2, 3, 16, 16),), dict(num_frames=2, return_dict=False)


def _prior():
    """unCLIP's prior: a causal transformer over text tokens, time and image embeddings."""
    from diffusers import PriorTransformer

    m = PriorTransformer(num_attention_heads=2, attention_head_dim=4, num_layers=1, embedding_dim=8,
                         num_embeddings=7, additional_embeddings=4)
    mask = torch.ones(1, 7, dtype=torch.bool)
    mask[0, 5:] = False
    kw = dict(encoder_hidden_states=_randn(1, 7, 8), attention_mask=mask, return_dict=False)
    return m.eval(), (_randn(1, 8), _t(), _randn(1, 8)), kw


def _t2i_adapter():
    """A T2I-Adapter: pixel unshuffle and a conv pyramid, one feature map per UNet stage."""
    from diffusers import T2IAdapter

    m = T2IAdapter(in_channels=3, channels=(8, 16), num_res_blocks=1, downscale_factor=2)
    return m.eval(), (_randn(1, 3, 16, 16),), {}


def _uvit():
    """aMUSEd's masked-token UVit: token ids in, codebook logits out."""
    from diffusers import UVit2DModel

    m = UVit2DModel(hidden_size=16, cond_embed_dim=CROSS, micro_cond_encode_dim=2, micro_cond_embed_dim=10,
                    encoder_hidden_size=CROSS, vocab_size=9, codebook_size=8, in_channels=8,
                    block_out_channels=16, num_res_blocks=1, block_num_heads=2, num_hidden_layers=1,
                    num_attention_heads=2, intermediate_size=32, sample_size=4)
    ids = torch.randint(0, 9, (1, 4, 4))
    args = (ids, _randn(1, 7, CROSS), _randn(1, CROSS), _randn(1, 5))
    return m.eval(), args, {}


def _auraflow():
    """AuraFlow: MMDiT blocks, then single-stream DiT blocks over image and text tokens."""
    from diffusers import AuraFlowTransformer2DModel

    m = AuraFlowTransformer2DModel(sample_size=8, patch_size=2, in_channels=4, num_mmdit_layers=1,
                                   num_single_dit_layers=1, attention_head_dim=8, num_attention_heads=2,
                                   joint_attention_dim=CROSS, caption_projection_dim=16, out_channels=4,
                                   pos_embed_max_size=16)
    kw = dict(encoder_hidden_states=_randn(1, 7, CROSS), timestep=_t(), return_dict=False)
    return m.eval(), (_randn(1, 4, 8, 8),), kw


def _sana():
    """Sana: linear (ReLU-kernel) self-attention and a convolutional GLU feed-forward."""
    from diffusers import SanaTransformer2DModel

    m = SanaTransformer2DModel(in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=8,
                               num_layers=1, num_cross_attention_heads=2, cross_attention_head_dim=8,
                               cross_attention_dim=16, caption_channels=CROSS, sample_size=8)
    kw = dict(encoder_hidden_states=_randn(1, 7, CROSS), timestep=_t(), return_dict=False)
    return m.eval(), (_randn(1, 4, 8, 8),), kw


def _oobleck():
    """Stable Audio's waveform VAE: strided Snake-activated convolutions, down and up."""
    from diffusers import AutoencoderOobleck

    m = AutoencoderOobleck(encoder_hidden_size=8, downsampling_ratios=[2, 2], channel_multiples=[1, 2],
                           decoder_channels=8, decoder_input_channels=4, audio_channels=2)
    return m.eval(), (_randn(1, 2, 64),), dict(return_dict=False)


def _asymmetric_vae():
    """An asymmetric VAE: its decoder also reads the masked image (inpainting)."""
    from diffusers import AsymmetricAutoencoderKL

    m = AsymmetricAutoencoderKL(down_block_out_channels=(8, 16), up_block_out_channels=(8, 16),
                                down_block_types=("DownEncoderBlock2D",) * 2,
                                up_block_types=("UpDecoderBlock2D",) * 2, norm_num_groups=4, sample_size=16)
    return m.eval(), (_randn(1, 3, 16, 16),), dict(return_dict=False)


def _entry(cls: str, make) -> Entry:
    return Entry(cls, "diffusers", cls, make=make)


DIFFUSERS: list[Entry] = [
    _entry("UNet2DModel", _unet2d),
    _entry("UNet2DConditionModel", _unet2d_cond),
    _entry("ControlNetModel", _controlnet),
    _entry("AutoencoderKL", _autoencoder_kl),
    _entry("VQModel", _vq),
    _entry("AutoencoderTiny", _autoencoder_tiny),
    _entry("UNet1DModel", _unet1d),
    _entry("Transformer2DModel", _transformer2d),
    _entry("DiTTransformer2DModel", _dit),
    _entry("PixArtTransformer2DModel", _pixart),
    _entry("SD3Transformer2DModel", _sd3),
    _entry("FluxTransformer2DModel", _flux),
    _entry("UNet3DConditionModel", _unet3d),
    _entry("UNetSpatioTemporalConditionModel", _unet_svd),
    _entry("AutoencoderKLTemporalDecoder", _vae_temporal),
    _entry("PriorTransformer", _prior),
    _entry("T2IAdapter", _t2i_adapter),
    _entry("UVit2DModel", _uvit),
    _entry("AuraFlowTransformer2DModel", _auraflow),
    _entry("SanaTransformer2DModel", _sana),
    _entry("AutoencoderOobleck", _oobleck),
    _entry("AsymmetricAutoencoderKL", _asymmetric_vae),
]
