"""Khronos NNEF's emitters: one module per op family, each with a ``KHRONOS`` table of
the ops whose standard form differs from the shared one (``t2n.backends.nnef.emit``)."""
