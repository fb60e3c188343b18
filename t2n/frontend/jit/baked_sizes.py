"""Sizes of the inputs that ``forward`` turned into Python values during the trace
(``min(x.shape[1], 8)``, ``math.ceil(x.shape[1] / 4)``, ``if x.shape[1] > 10:``): the
trace keeps the value the example's size gave. Where that size is a dynamic axis the
artifact would be right at the traced size only, so the dynamic-axes pass reports each
place with the sizes it finds baked (``BakedSizeWarning``, or with
``strict_dynamic_axes=True`` one ``DynamicAxesError`` listing all, before anything is
written)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from t2n.frontend.specialization import Specialization, grouped

ADVICE = ("compute it with tensor ops on sizes (x.shape[1] // 4, torch.clamp, slicing, which t2n "
          "keeps symbolic) instead of Python's min/max/math/if, or drop that dynamic axis")


def dynamic_places(found: Sequence[Specialization], input_names: Sequence[str], ranks: Sequence[int],
                   axes: Mapping[str, Mapping[int, str]]) -> list[str]:
    """One line per place whose value follows a dynamic axis read from an input
    (``x.shape[1]``, ``x.size(-1)``). Sizes of intermediate tensors are not judged here:
    most are static (a head size), and those that follow an axis and reach the graph are
    checked by the dynamic-axes pass."""
    lines = []
    for place, count in grouped(found).items():
        followed = []
        for index, axis in sorted(place.sizes, key=lambda p: (p[0], -1 if p[1] is None else p[1])):
            name = input_names[index] if index < len(input_names) else f"input {index}"
            dynamic = axes.get(name, {})
            rank = ranks[index] if index < len(ranks) else 0
            if axis is not None and rank and axis % rank in dynamic:
                followed.append(f"input '{name}' axis {axis % rank} (symbol {dynamic[axis % rank]})")
        if followed:
            times = f" ({count} times)" if count > 1 else ""
            lines.append(f"{place.describe()}{times}; it follows {', '.join(followed)}")
    return lines


def size_conversion_lines(found: Sequence[Specialization], input_names: Sequence[str], ranks: Sequence[int],
                          axes: Mapping[str, Mapping[int, str]]) -> list[str]:
    """The places, as the dynamic-axes pass lists baked sizes (with the advice)."""
    return [f"{line}: the trace turned this size into a Python value, kept at the traced size "
            f"({ADVICE})" for line in dynamic_places(found, input_names, ranks, axes)]
