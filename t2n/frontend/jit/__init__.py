"""JIT hardening: specialize a TorchScript graph for example inputs so it can be lowered."""

from t2n.frontend.jit.attribute_state import AttributeStateWarning
from t2n.frontend.jit.harden import harden_jit_for_export

__all__ = ["AttributeStateWarning", "harden_jit_for_export"]
