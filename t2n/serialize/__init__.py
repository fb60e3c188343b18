"""Tensors and artifacts on disk: the ``.dat`` format (:mod:`.dat`), artifact
containers written atomically (:mod:`.archive`), safetensors read lazily
(:mod:`.safetensors_reader`), named tensors written to a folder (:mod:`.tensors`),
progress reporting (:mod:`.progress`) and the torch edge (:mod:`.torch_io`, the only
module here that imports torch). Nothing is imported here, so that importing one
module never loads torch."""
