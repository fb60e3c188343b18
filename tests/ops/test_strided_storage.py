"""``as_strided`` indexes its input's *storage*, as PyTorch does: on a view (a transpose,
a slice with steps, an expand, a narrow, a chunk) the positions are read from the memory
the view shares with its base, never from the view's elements laid out row-major. Each
case runs in tract through the jit frontend (and, in the slow step, through the export
frontend in tract and the Khronos interpreter); what cannot be known is refused with a
typed error, never computed silently wrong."""

from __future__ import annotations

import pytest
import torch

from t2n import LoweringRegistry, compile
from t2n.backends.tract.target import TractNNEF
from t2n.errors import UnsupportedOpsError
from t2n.frontend.lowering import core_aten
from t2n.frontend.lowering.storage import Layout, elements_at
from t2n.testing import Lambda, check_fn

A = torch.ops.aten


def r(*shape: int) -> torch.Tensor:
    return torch.randn(*shape)


def longformer_chunks(t: torch.Tensor) -> torch.Tensor:
    """Longformer's ``_chunk`` of its query: overlapping windows of a (batch·heads, seq, dim)
    tensor that is a non-contiguous view of the (seq, batch, heads·dim) projection, with
    the strides taken from that view."""
    seq, batch, _ = t.shape
    heads = t.view(seq, batch, 2, 3).transpose(0, 1).transpose(1, 2).reshape(batch * 2, seq, 3)
    w = 2
    chunks = heads.view(heads.size(0), seq // (2 * w), 2 * w, 3)
    size = list(chunks.size())
    size[1] = size[1] * 2 - 1
    stride = list(chunks.stride())
    stride[1] = stride[1] // 2
    return chunks.as_strided(size=size, stride=stride) * 1.5


CASES = {
    # positions inside the view: read from the view's own elements
    "transpose": (lambda t: t.transpose(0, 1).as_strided((3, 2), (1, 3)), (r(3, 4),)),
    "transposed_windows": (lambda t: t.t().as_strided((3, 2, 2), (1, 4, 1)), (r(4, 6),)),
    "longformer_chunks": (longformer_chunks, (r(16, 1, 6),)),
    "step_slice": (lambda t: t[:, ::2].as_strided((2, 3), (4, 1)), (r(3, 8),)),
    "expand": (lambda t: t.unsqueeze(0).expand(3, 5).as_strided([3, 2], [0, 2]), (r(5),)),
    "in_place_on_a_transpose": (lambda t: (t * 1).t().mul_(2).as_strided((2, 2), (1, 2)), (r(3, 4),)),
    # positions outside the view: read from the tensor that owns the memory
    "past_a_slice": (lambda t: A.as_strided(t[:6], [2, 3], [3, 2]), (r(12),)),
    "between_expanded_steps": (lambda t: t.expand(2, 12)[:, ::3].as_strided([2, 2], [1, 3]), (r(12),)),
    "narrow_with_offset": (lambda t: t.narrow(1, 2, 3).as_strided((2, 4), (6, 1), 1), (r(4, 6),)),
    "narrow_from_its_start": (lambda t: t.narrow(1, 2, 3).as_strided((2, 4), (6, 1)), (r(4, 6),)),
    "chunk_piece": (lambda t: t.chunk(2, 1)[1].as_strided((2, 3), (3, 1)), (r(4, 6),)),
    # a reshape that had to copy owns a fresh row-major buffer
    "reshape_copy": (lambda t: t.t().reshape(-1).as_strided((3, 2), (2, 1), 1), (r(3, 4),)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_as_strided_reads_the_storage_of_a_view(name: str) -> None:
    fn, args = CASES[name]
    res = check_fn(fn, *args, targets=("tract",))
    assert "aten::as_strided" in res.artifacts["tract"].ir.info.aten_ops


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_as_strided_reads_the_storage_of_a_view_through_export(name: str) -> None:
    # torch.export's fake tensors give the strides and storage offsets; Khronos too
    fn, args = CASES[name]
    res = check_fn(fn, *args, frontend="export")
    assert "aten::as_strided" in res.artifacts["khronos"].ir.info.aten_ops


class ScriptedWindows(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * 2).t().as_strided([2, 2], [1, 3])


def test_unrecorded_strides_are_refused() -> None:
    # a ScriptModule's graph records no strides: the layout of (x * 2).t() is unknown here
    with pytest.raises(UnsupportedOpsError, match=r"aten::as_strided[\s\S]*cannot be known[\s\S]*"
                                                  r"strides of its input \(aten::t\) were not recorded"):
        compile(torch.jit.script(ScriptedWindows()), (r(3, 4),), TractNNEF())


def test_reading_past_the_memory_the_model_holds_is_refused() -> None:
    # the example input is a view of a larger tensor: PyTorch reads the elements after it,
    # which the artifact's input does not have
    big = r(12)
    with pytest.raises(UnsupportedOpsError, match=r"aten::as_strided[\s\S]*reads storage position 6, which "
                                                  r"none of the 6 elements"):
        check_fn(lambda t: t.as_strided([2, 4], [4, 1]), big[:6], targets=("tract",))


def test_elements_at_maps_positions_to_row_major_elements() -> None:
    transposed = Layout((3, 2), (1, 3))  # a (2, 3) tensor transposed
    assert elements_at(transposed, torch.arange(6).numpy()).tolist() == [0, 2, 4, 1, 3, 5]
    expanded = Layout((2, 3), (0, 1))
    assert elements_at(expanded, torch.tensor([2, 0]).numpy()).tolist() in ([2, 0], [5, 3])
    stepped = Layout((2,), (2,))
    assert elements_at(stepped, torch.tensor([1]).numpy()) is None


def test_the_stride_of_a_view_is_the_recorded_one() -> None:
    # sym_stride (torch.export's x.stride()) run in aten::size's place, as the size tests of
    # tests/frontend_export do: t.t() of a (2, 3) tensor has strides (1, 3), not (2, 1)
    reg = LoweringRegistry.default().extended({"aten::size": core_aten.sym_stride}, override=True)
    x = r(2, 3)
    art = compile(Lambda(lambda t: t.t() * t.t().size(0) + t.t().size(1)), (x,), TractNNEF(), registry=reg)
    art.check("approximate", inputs=[x.numpy()], expected=[(x.t() * 1 + 3).numpy()])
