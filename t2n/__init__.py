"""t2n: export PyTorch models to NNEF for tract and strict Khronos NNEF consumers.

    artifact = t2n.compile(model, (x,), t2n.TractNNEF("0.23.9"))
    artifact.save("model.nnef.tgz")
    artifact.check()

    t2n.export(model, (x,), "model.nnef.tar")   # compile and save, weights written while compiling
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from t2n.version import __version__

_LAZY = {
    "compile": "t2n.api",
    "export": "t2n.api",
    "Artifact": "t2n.artifact",
    "TractNNEF": "t2n.backends.tract.target",
    "KhronosNNEF": "t2n.backends.khronos.target",
    "Target": "t2n.backends.target",
    "Tolerance": "t2n.check.compare",
    "CheckReport": "t2n.check.compare",
    "LoweringRegistry": "t2n.frontend.registry",
    "RuleSet": "t2n.frontend.registry",
    "LoweringContext": "t2n.frontend.context",
    "ModuleExtractor": "t2n.frontend.extractors",
    "ExtractorContext": "t2n.frontend.extractors",
    "Pass": "t2n.passes.base",
    "PassResult": "t2n.passes.base",
    "PassManager": "t2n.passes.manager",
    "export_tensors_to_nnef": "t2n.serialize.torch_io",
    "export_tensors_from_disk_to_nnef": "t2n.serialize.torch_io",
    "iter_torch_tensors_from_disk": "t2n.serialize.torch_io",
    "harden_jit_for_export": "t2n.frontend.jit",
    "BakedSizeWarning": "t2n.passes.dynamic_axes",
    "SpecializedTraceWarning": "t2n.frontend.specialization",
    "UntracedEffectWarning": "t2n.frontend.trace_replay",
    "NonFiniteWeightWarning": "t2n.serialize.finite",
    "UntestedReleaseWarning": "t2n.reference.releases",
    # naming schemes
    "VariableNamingScheme": "t2n.backends.nnef.naming",
    # drop-in entry point (names of the widely used exporter)
    "export_model_to_nnef": "t2n.dropin.export",
    "SemanticVersion": "t2n.dropin.version",
    "TractCheckTolerance": "t2n.dropin.names",
    "TractFeatureFlag": "t2n.dropin.names",
    # Q4_0 weight quantization
    "quantize": "t2n.quant.model",
    "quantize_tensor": "t2n.quant.model",
    "quantized_state": "t2n.quant.model",
    "Q40Recipe": "t2n.quant.recipes",
    "gguf_tensors": "t2n.quant.gguf_io",
    # tract version matrix
    "run_in_tract_version": "t2n.backends.tract.environments",
    # reading artifacts back; remodelling their interface
    "read": "t2n.reading",
    "NNEFModel": "t2n.reading",
    "RemodelPlan": "t2n.remodel.plan",
}

if TYPE_CHECKING:
    from t2n.api import compile, export
    from t2n.artifact import Artifact
    from t2n.backends.khronos.target import KhronosNNEF
    from t2n.backends.nnef.naming import VariableNamingScheme
    from t2n.backends.target import Target
    from t2n.backends.tract.environments import run_in_tract_version
    from t2n.backends.tract.target import TractNNEF
    from t2n.check.compare import CheckReport, Tolerance
    from t2n.dropin.export import export_model_to_nnef
    from t2n.dropin.names import TractCheckTolerance, TractFeatureFlag
    from t2n.dropin.version import SemanticVersion
    from t2n.frontend.context import LoweringContext
    from t2n.frontend.extractors import ExtractorContext, ModuleExtractor
    from t2n.frontend.jit import harden_jit_for_export
    from t2n.frontend.registry import LoweringRegistry, RuleSet
    from t2n.frontend.specialization import SpecializedTraceWarning
    from t2n.frontend.trace_replay import UntracedEffectWarning
    from t2n.passes.base import Pass, PassResult
    from t2n.passes.dynamic_axes import BakedSizeWarning
    from t2n.passes.manager import PassManager
    from t2n.quant.gguf_io import gguf_tensors
    from t2n.quant.model import quantize, quantize_tensor, quantized_state
    from t2n.quant.recipes import Q40Recipe
    from t2n.reading import NNEFModel, read
    from t2n.reference.releases import UntestedReleaseWarning
    from t2n.remodel.plan import RemodelPlan
    from t2n.serialize.finite import NonFiniteWeightWarning
    from t2n.serialize.torch_io import (
        export_tensors_from_disk_to_nnef,
        export_tensors_to_nnef,
        iter_torch_tensors_from_disk,
    )


def __getattr__(name: str) -> Any:
    """Import on first use, so ``import t2n`` (and the engine worker) stays light."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 't2n' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "Artifact", "BakedSizeWarning", "CheckReport", "ExtractorContext", "ModuleExtractor", "KhronosNNEF", "LoweringContext", "LoweringRegistry", "Pass",
    "PassManager", "PassResult", "RuleSet", "SpecializedTraceWarning", "UntracedEffectWarning", "NonFiniteWeightWarning", "UntestedReleaseWarning", "Target", "Tolerance", "TractNNEF", "__version__",
    "compile", "export", "export_tensors_from_disk_to_nnef", "export_tensors_to_nnef",
    "iter_torch_tensors_from_disk", "harden_jit_for_export", "VariableNamingScheme",
    "export_model_to_nnef", "SemanticVersion", "TractCheckTolerance", "TractFeatureFlag",
    "Q40Recipe", "gguf_tensors", "quantize", "quantize_tensor", "quantized_state",
    "run_in_tract_version", "read", "NNEFModel", "RemodelPlan",
]
