"""The drop-in entry point ``export_model_to_nnef`` and what it needs beside ``compile``:
artifact paths by suffix and ``compression_level``, target versions given as objects,
tract properties, and how ``check_io`` settings combine.

Only :mod:`t2n.dropin.export` imports torch; the other modules are read by the targets.
"""
