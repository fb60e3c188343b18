"""NNEF emitters by op family. Each module may define ``COMMON`` (both targets),
``TRACT`` and ``KHRONOS`` tables; a target's entries override the common ones."""
