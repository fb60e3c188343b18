"""NNEF emitters by op family. Each module may define ``COMMON`` (both targets),
``TRACT`` and ``KHRONOS`` tables; a target's entries override the common ones. These
are the built-in tables (``Target.builtin_emitters``); a user adds or replaces
emitters for one target with ``Target.with_emitters``, without editing them."""
