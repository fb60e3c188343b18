"""The remodeler: a plan (YAML or JSON, in the widely used exporter's shape-config
format) carried out on a graph's boundary by the passes of :mod:`t2n.passes.remodel`.

``t2n.compile(..., remodel=plan)`` applies it while exporting; ``t2n.read(path).remodel(plan)``
and ``t2n remodel ARTIFACT --plan plan.yaml -o OUT`` apply it to an existing artifact.
See ``docs/remodeler.md``.
"""

from t2n.remodel.apply import apply_plan, plan_passes
from t2n.remodel.plan import GraphPlan, InputPlan, OutputPlan, RemodelPlan, as_plan

__all__ = ["GraphPlan", "InputPlan", "OutputPlan", "RemodelPlan", "apply_plan", "as_plan", "plan_passes"]
