"""Running artifacts in the real engines and comparing with PyTorch."""

from t2n.check.compare import CheckReport, OutputReport, Tolerance, compare
from t2n.check.engines import EngineResult, EngineWorker, run_khronos, run_tract

__all__ = ["CheckReport", "EngineResult", "EngineWorker", "OutputReport", "Tolerance", "compare",
           "run_khronos", "run_tract"]
