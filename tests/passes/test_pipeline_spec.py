"""Pipelines given by name: the spec grammar, where passes land, and every bad spec
refused with InvalidArgumentError before the model is traced."""

import attrs
import pytest
import torch
from torch import nn

import t2n
from t2n.errors import InvalidArgumentError
from t2n.ir import Graph
from t2n.passes import (
    DEFAULT_PIPELINE,
    Pass,
    PassResult,
    builtin_passes,
    compile_pipeline,
    parse_pipeline,
)


@attrs.frozen
class Snapshot(Pass):
    """Records the op kinds it sees (to show where it ran); changes nothing."""

    seen: list = attrs.field(factory=list, eq=False)
    name = "snapshot"

    def run(self, graph: Graph) -> PassResult:
        self.seen.append(sorted({op.kind for op in graph.ops()}))
        return PassResult(graph, False)


@attrs.frozen
class NamedLater(Snapshot):
    name = "named-later"


def names(stages):
    return [p.display_name for p in stages]


def stages_of(spec, **kw):
    return names(compile_pipeline(spec, **kw).passes)


KNOWN = {**builtin_passes(), "snapshot": Snapshot()}
DEFAULT = list(DEFAULT_PIPELINE)


# -- the grammar ---------------------------------------------------------------------

@pytest.mark.parametrize("spec, expected", [
    ("", DEFAULT),
    ("default", DEFAULT),
    (" default , -fold-batch-norm ", ["bf16-as", "dynamic-axes", "cleanup", "cleanup"]),
    ("-fold-batch-norm", ["bf16-as", "dynamic-axes", "cleanup", "cleanup"]),
    ("+snapshot", DEFAULT + ["snapshot"]),
    ("snapshot", ["snapshot"]),
    ("default,+snapshot@after:fold-batch-norm", ["bf16-as", "dynamic-axes", "cleanup", "fold-batch-norm",
                                                 "snapshot", "cleanup"]),
    ("+snapshot@before:cleanup", ["bf16-as", "dynamic-axes", "snapshot", "cleanup", "fold-batch-norm",
                                  "cleanup"]),
    ("-cleanup,+snapshot@before:fold-batch-norm", ["bf16-as", "dynamic-axes", "snapshot", "fold-batch-norm"]),
    (["default", "-fold-batch-norm"], ["bf16-as", "dynamic-axes", "cleanup", "cleanup"]),
])
def test_parse_pipeline(spec, expected):
    assert names(parse_pipeline(spec, KNOWN, default=DEFAULT_PIPELINE)) == expected


def test_parse_pipeline_for_a_command_line_uses_the_builtins_by_default():
    assert names(parse_pipeline("default,-fold-batch-norm")) == ["bf16-as", "dynamic-axes", "cleanup", "cleanup"]
    with pytest.raises(InvalidArgumentError, match="known names are: default, bf16-as, cleanup, constant-folding"):
        parse_pipeline("+snapshot")
    with pytest.raises(InvalidArgumentError, match="dynamic-axes cannot be removed"):
        parse_pipeline("-dynamic-axes")


def test_parse_pipeline_mixes_names_and_pass_objects():
    mine = NamedLater()
    got = parse_pipeline([mine, "+snapshot@after:named-later", "-fold-batch-norm"], KNOWN, default=DEFAULT_PIPELINE)
    assert names(got) == DEFAULT[:3] + ["cleanup", "named-later", "snapshot"]
    assert got[-2] is mine and got[-1] is KNOWN["snapshot"]


@pytest.mark.parametrize("spec, expected", [
    ((), DEFAULT),
    ("default,-fold-batch-norm", ["bf16-as", "dynamic-axes", "cleanup"]),  # two cleanups in a row become one
    ([Snapshot()], DEFAULT + ["snapshot", "cleanup"]),  # today's list form: after the built-ins, then cleaned up
    ("default,+snapshot", DEFAULT + ["snapshot", "cleanup"]),
    ("snapshot", ["bf16-as", "dynamic-axes", "snapshot"]),  # required ones first; no cleanup asked, none added
    ("snapshot,bf16-as", ["dynamic-axes", "snapshot", "bf16-as"]),  # a required pass may be placed
    ("dead-node-elimination,constant-folding", ["bf16-as", "dynamic-axes", "dead-node-elimination",
                                                "constant-folding"]),
])
def test_compile_pipeline(spec, expected):
    assert stages_of(spec, registry={"snapshot": Snapshot()}) == expected


def test_fold_batch_norm_false_is_minus_fold_batch_norm():
    assert stages_of("", fold_batch_norm=False) == stages_of("-fold-batch-norm")
    assert stages_of("-fold-batch-norm", fold_batch_norm=False) == ["bf16-as", "dynamic-axes", "cleanup"]


# -- bad specs ---------------------------------------------------------------------------

@pytest.mark.parametrize("spec, words", [
    ("default,+snapshto", ["'+snapshto'", "no pass is called 'snapshto'", "known names are: default,",
                           "fold-batch-norm", "snapshot", "pass_registry"]),
    ("-constant-folding", ["'-constant-folding'", "'constant-folding' is not in the pipeline",
                           "pipeline so far is: bf16-as, dynamic-axes, cleanup, fold-batch-norm, cleanup"]),
    ("-nothing", ["'-nothing'", "'nothing' names no known pass", "known names are: default,"]),
    ("+snapshot@after:nowhere", ["'+snapshot@after:nowhere'", "no stage called 'nowhere'",
                                 "pipeline so far is: bf16-as"]),
    ("+snapshot@middle:cleanup", ["'+snapshot@middle:cleanup'", "malformed", "+NAME@before:OTHER"]),
    ("-fold-batch-norm@after:cleanup", ["'-fold-batch-norm@after:cleanup'", "a removal takes no position"]),
    ("default,,snapshot", ["pipeline item ''", "malformed"]),
    ("default;snapshot", ["'default;snapshot'", "malformed", "separated by commas"]),
    ("-bf16-as", ["'-bf16-as'", "bf16-as cannot be removed"]),
    ("-dynamic-axes", ["'-dynamic-axes'", "dynamic-axes cannot be removed"]),
    (3, ["passes must be a pipeline string", "got 3"]),
    (b"default", ["passes must be a pipeline string", "b'default'"]),
    (Snapshot(), ["write passes=[Snapshot("]),
    ([Snapshot], ["passes[0]", "a Pass class, not an instance (add '()')"]),
    (["default", None], ["passes[1] = None is a NoneType"]),
])
def test_bad_specs_are_refused_naming_the_item(spec, words):
    with pytest.raises(InvalidArgumentError) as info:
        compile_pipeline(spec, registry={"snapshot": Snapshot()})
    for w in words:
        assert w in str(info.value)


@pytest.mark.parametrize("registry, words", [
    (["snapshot"], ["pass_registry must be a dict name → t2n.Pass object"]),
    ({"fold-batch-norm": Snapshot()}, ["'fold-batch-norm' is a built-in pass", "another name"]),
    ({"default": Snapshot()}, ["'default' is not a pass name"]),
    ({"my pass": Snapshot()}, ["'my pass' is not a pass name"]),
    ({3: Snapshot()}, ["key 3 is not a pass name"]),
    ({"snapshot": Snapshot}, ["pass_registry['snapshot']", "Pass class, not an instance"]),
    ({"snapshot": "snapshot"}, ["pass_registry['snapshot'] = 'snapshot' is a str, not a t2n.Pass"]),
])
def test_bad_registries_are_refused(registry, words):
    with pytest.raises(InvalidArgumentError) as info:
        compile_pipeline("default", registry=registry)
    for w in words:
        assert w in str(info.value)


# -- through compile and export ------------------------------------------------------------

def _bn(bn: nn.Module) -> nn.Module:
    with torch.no_grad():
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-1, 1)
    return bn.eval()


class CountsCalls(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = _bn(nn.BatchNorm2d(4))
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return self.bn(self.conv(x))


ARGS = (torch.randn(1, 3, 6, 6),)


def test_a_named_pass_lands_where_the_spec_says():
    before, after = Snapshot(), Snapshot()
    art = t2n.compile(CountsCalls().eval(), ARGS, passes="default,+early@before:fold-batch-norm,"
                      "+late@after:fold-batch-norm", pass_registry={"early": before, "late": after}, verify_ir=True)
    assert "mul" in before.seen[0]  # the batch norm's scale, not folded yet
    assert "mul" not in after.seen[0]
    assert art.stats["pass_stats"]["fold-batch-norm.folded"] >= 1
    assert art.check().ok


def test_fold_batch_norm_false_and_the_spec_give_the_same_artifact():
    model = CountsCalls().eval()
    by_flag = t2n.compile(model, ARGS, fold_batch_norm=False)
    by_spec = t2n.compile(model, ARGS, passes="-fold-batch-norm")
    both = t2n.compile(model, ARGS, passes="-fold-batch-norm", fold_batch_norm=False)
    assert by_flag.graph_nnef == by_spec.graph_nnef == both.graph_nnef
    assert "mul" in [op.kind for op in by_spec.ir.ops()]
    assert by_spec.check().ok


@pytest.mark.parametrize("passes", ["default,+nope", "-bf16-as", ["default", 1.5]])
def test_compile_refuses_a_bad_spec_before_tracing(passes):
    model = CountsCalls()
    with pytest.raises(InvalidArgumentError):
        t2n.compile(model, ARGS, passes=passes)
    assert model.calls == 0


def test_export_refuses_a_bad_registry_before_writing(tmp_path):
    model = CountsCalls()
    dest = tmp_path / "model.nnef.tgz"
    with pytest.raises(InvalidArgumentError, match="'cleanup' is a built-in pass"):
        t2n.export(model, ARGS, dest, passes="default", pass_registry={"cleanup": Snapshot()})
    assert model.calls == 0 and not dest.exists() and list(tmp_path.iterdir()) == []
