"""The NNEF emitters every target shares, by op family: each module defines a ``COMMON``
table (and the helpers its targets' own emitters reuse). A target's own tables
(``t2n.backends.tract.emit``, ``t2n.backends.khronos.emit``) add to and replace these;
a user adds or replaces emitters for one target with ``Target.with_emitters``, without
editing any of them."""
