"""The typed SSA intermediate representation. Knows nothing of torch."""

from t2n.ir.builder import Builder, dims_array
from t2n.ir.dims import (
    Dim,
    DimParseError,
    Sym,
    SymbolicComparisonError,
    UnboundSymbolError,
    is_static,
    parse_dim,
)
from t2n.ir.dtypes import DType
from t2n.ir.graph import Graph
from t2n.ir.nodes import GraphEditError, Op, SourceLoc, Value
from t2n.ir.parser import IRParseError, parse_graph
from t2n.ir.printer import print_graph
from t2n.ir.schema import InferContext, OpSchema, OpSet, OpTable, Trait, UnknownOpError
from t2n.ir.tensor_data import ArrayData, LazyData, TensorData
from t2n.ir.types import QuantInfo, Shape, TensorType
from t2n.ir.verify import IRVerificationError, verify

__all__ = [
    "ArrayData", "Builder", "DType", "Dim", "DimParseError", "Graph", "GraphEditError",
    "IRParseError", "IRVerificationError", "InferContext", "LazyData", "Op", "OpSchema", "OpSet",
    "OpTable", "QuantInfo", "Shape", "SourceLoc", "Sym", "SymbolicComparisonError", "TensorData",
    "TensorType", "Trait", "UnboundSymbolError", "UnknownOpError", "Value", "dims_array",
    "is_static", "parse_dim", "parse_graph", "print_graph", "verify",
]
