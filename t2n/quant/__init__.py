"""Weight quantization before export: Q4_0 blocks (:mod:`.q4_0`, torch-free), the recipes
that choose which weights to quantize and how (:mod:`.recipes`), and
:func:`t2n.quantize`, which quantizes a model's weights in place (:mod:`.model`, the
only module here that imports torch). Nothing is imported here, so that the writers
can use :mod:`.q4_0` without loading torch."""
