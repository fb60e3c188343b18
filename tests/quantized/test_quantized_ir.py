"""The quantized IR ops as text: types with their quantization print and parse back,
and the ops refuse operands they do not define."""

from __future__ import annotations

import pytest

from t2n.ir import parse_graph, print_graph
from t2n.ir.types import QuantInfo, TensorType

GRAPH = """graph main(%x: f32[1, 2, 4, 4]) -> (%y) {
  %q: u8[1, 2, 4, 4] qu8<0.5, 3> = quantize(%x) {dtype=u8, scale=0.5, zero_point=3}
  %w: i8[3, 2, 1, 1] = const() {data=dense<i8[3, 2, 1, 1]>}
  %b: i32[3] = const() {data=dense<i32[3]>}
  %c: u8[1, 3, 4, 4] qu8<0.25, 0> = qconv(%q, %w, %b) {dilation=[1, 1], dtype=u8, groups=1, padding=[[0, 0], [0, 0]], relu=false, stride=[1, 1], w_scales=[0.1, 0.2, 0.3], w_zero_point=0, x_scale=0.5, x_zero_point=3, y_scale=0.25, y_zero_point=0}
  %y: f32[1, 3, 4, 4] = dequantize(%c) {scale=0.25, zero_point=0}
}
"""


def test_quantized_graph_text_round_trips() -> None:
    text = print_graph(parse_graph(GRAPH))  # constants print their (zero) values
    assert print_graph(parse_graph(text)) == text
    assert "%c: u8[1, 3, 4, 4] qu8<0.25, 0> = qconv(" in text


@pytest.mark.parametrize("info", [
    QuantInfo((0.5,), (3,), 8, False),
    QuantInfo((0.1, 0.2), (0, 0), 8, True, 0),
])
def test_quant_info_text_round_trips(info: QuantInfo) -> None:
    assert QuantInfo.parse(str(info)) == info
    t = TensorType.parse(f"i8[2, 3] {info}")
    assert t.quant == info


@pytest.mark.parametrize("bad, why", [
    ("%w: f32[3, 2, 1, 1] = const() {data=dense<f32[3, 2, 1, 1]>}", "weights must be i8"),
    ("%b: i32[2] = const() {data=dense<i32[2]>}", "bias must be i32 with one entry per output channel"),
])
def test_qconv_refuses_operands_it_does_not_define(bad: str, why: str) -> None:
    from t2n.ir.infer_utils import InferError

    name = bad.split(":")[0].strip()
    lines = [bad if ln.strip().startswith(name + ":") else ln for ln in GRAPH.splitlines()]
    with pytest.raises(InferError, match=why):
        parse_graph("\n".join(lines))
