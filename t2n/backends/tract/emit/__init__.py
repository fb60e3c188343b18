"""tract's emitters: one module per op family, each with a ``TRACT`` table of the ops
tract writes its own way (its extensions, version-gated forms, its own IR ops); they
add to and replace the shared ones (``t2n.backends.nnef.emit``)."""
