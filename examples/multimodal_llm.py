"""Export a tiny vision-language model (Gemma 3: SigLIP tower + projector + decoder,
random weights) from a checkpoint folder, then run image + prompt -> tokens in tract and
compare with transformers' greedy ``generate``.

    python examples/multimodal_llm.py [output folder]   (default: multimodal_out)

The same export from the command line: ``t2n llm --local-dir CHECKPOINT --export-dirpath OUT``.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import torch

from t2n.llm import export_llm
from t2n.llm.multimodal.generate import tract_multimodal_generate

IMAGE_TOKEN, BEGIN_IMAGE, END_IMAGE = 90, 91, 92


def tiny_gemma3() -> torch.nn.Module:
    import transformers as tf

    torch.manual_seed(3)
    config = tf.Gemma3Config(
        text_config=dict(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=128,
                         sliding_window=4, layer_types=["sliding_attention", "full_attention"],
                         initializer_range=0.05),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                           image_size=28, patch_size=7),
        mm_tokens_per_image=4, image_token_id=IMAGE_TOKEN, boi_token_id=BEGIN_IMAGE, eoi_token_id=END_IMAGE)
    model = tf.Gemma3ForConditionalGeneration(config).eval()
    with torch.no_grad():
        model.model.multi_modal_projector.mm_input_projection_weight.normal_(0, 0.2)
    model.generation_config.eos_token_id = None  # greedy all along, as below in tract
    return model


def main(out: str = "multimodal_out") -> list[int]:
    model = tiny_gemma3()
    with tempfile.TemporaryDirectory() as checkpoint:
        model.save_pretrained(checkpoint)
        manifest = export_llm(checkpoint, out, overwrite=True)
    print(f"wrote {manifest}:\n{json.dumps(json.loads(Path(manifest).read_text()), indent=2)}")

    pixels = torch.randn((1, 3, 28, 28), generator=torch.Generator().manual_seed(5))
    prompt = torch.tensor([[2, 5, BEGIN_IMAGE, *[IMAGE_TOKEN] * 4, END_IMAGE, 7, 8]])  # one image: 4 tokens
    tokens = tract_multimodal_generate(out, prompt, 8, pixels.numpy())
    with torch.no_grad():
        reference = model.generate(prompt, pixel_values=pixels, token_type_ids=(prompt == IMAGE_TOKEN).long(),
                                   attention_mask=torch.ones_like(prompt), max_new_tokens=8, do_sample=False,
                                   pad_token_id=0)[0, prompt.shape[1]:].tolist()
    print(f"tract:        {tokens}\ntransformers: {reference}")
    assert tokens == reference, "tract and transformers generate different tokens"
    return tokens


if __name__ == "__main__":
    main(*sys.argv[1:2])
