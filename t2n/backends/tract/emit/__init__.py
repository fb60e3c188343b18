"""tract's emitters: NNEF text for the IR ops only the tract target writes."""
