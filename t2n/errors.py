"""Typed errors. Each says where in the model (module path, aten op, source line)
and what to do; an export with unsupported ops lists every one of them at once."""

from __future__ import annotations

from collections.abc import Sequence

import attrs


class T2NError(Exception):
    """Base class of every error t2n raises on purpose."""


class InvalidArgumentError(T2NError, ValueError):
    """An argument of a public function is wrong (names, shapes, options)."""


class TraceError(T2NError):
    """PyTorch could not trace or script the model."""


@attrs.frozen
class OpProblem:
    """One op that could not be exported, and where it is."""

    op: str
    module: str = ""
    source: str = ""
    reason: str = ""

    def __str__(self) -> str:
        where = f"module '{self.module}'" if self.module else "the top-level module"
        at = f" ({self.source})" if self.source else ""
        why = f": {self.reason}" if self.reason else ""
        return f"{self.op} in {where}{at}{why}"


class _ProblemList(T2NError):
    headline = ""
    advice = ""

    def __init__(self, problems: Sequence[OpProblem], target: str = "") -> None:
        self.problems = list(problems)
        self.target = target
        counts: dict[OpProblem, int] = {}
        for p in self.problems:
            counts[p] = counts.get(p, 0) + 1
        lines = "\n".join(f"  - {p}" + (f" ({n} times)" if n > 1 else "") for p, n in counts.items())
        head = self.headline.format(n=len(self.problems), target=target or "the target")
        super().__init__(f"{head}\n{lines}\n{self.advice}")

    @property
    def ops(self) -> list[str]:
        return sorted({p.op for p in self.problems})


class UnsupportedOpsError(_ProblemList):
    """The model uses ops that t2n has no lowering rule for (all of them are listed)."""

    headline = "{n} op use(s) cannot be exported; nothing was written:"
    advice = (
        "What to do: rewrite these calls with supported ops, or register a lowering rule "
        "(t2n.LoweringRegistry.default().extended(...)) and pass it as compile(..., registry=...)."
    )


class SamplingOpsError(UnsupportedOpsError):
    """The model draws random numbers inside ``forward`` (``torch.randn``, ``rand``,
    ``randn_like``, ``normal``...), which an artifact cannot reproduce; every draw is
    listed with its module path, op and source line."""

    headline = "{n} random draw(s) inside the model cannot be exported as they are; nothing was written:"
    advice = (
        "What to do: pass compile(..., sampling=\"inputs\"): each draw becomes a graph input "
        "(noise_0, noise_1... in graph order, listed in artifact.stats[\"noise_inputs\"]) that the caller "
        "fills with the noise, and the artifact computes PyTorch's numbers for the same noise. Or draw "
        "the noise outside forward and pass it in as an argument."
    )


class NotExpressibleError(_ProblemList):
    """Ops that the chosen target cannot express (e.g. tract-only ops on Khronos)."""

    headline = "{n} op use(s) cannot be expressed on {target}; nothing was written:"
    advice = "What to do: export to TractNNEF, or replace these ops in the model."


class LoweringError(T2NError):
    """A lowering rule failed on an op it claims to support (a t2n bug, or odd input)."""


class PassError(T2NError):
    """A pass failed, broke the IR or did not converge."""

    def __init__(self, message: str, *, pass_name: str = "", previous: Sequence[str] = ()) -> None:
        self.pass_name = pass_name
        self.previous = tuple(previous)
        if previous:
            message += f"\n(passes run before it: {', '.join(previous[-12:])})"
        super().__init__(message)


class DynamicAxesError(T2NError, ValueError):
    """A dynamic_axes specification is invalid, or the model cannot honour it."""


class SerializationError(T2NError):
    """Writing or reading an artifact failed."""


class CorruptTensorFileError(SerializationError):
    """A .dat file is truncated, has a bad header or an unknown item type."""


class CorruptArchiveError(SerializationError):
    """An archive is unreadable or a member escapes its folder."""


class TensorTooLargeError(SerializationError):
    """A tensor exceeds what the .dat format can hold (a 4 GiB payload)."""


class CheckError(T2NError):
    """Running the artifact in an engine, or comparing its outputs, failed."""


class EngineError(CheckError):
    """The engine refused or failed to run the artifact (its message is included).

    ``phase`` is what the engine was doing (``loading``, ``optimizing``, ``running``);
    ``bundle`` the folder of the debug bundle, when one was written.
    """

    def __init__(self, message: str, *, phase: str = "", bundle: str | None = None) -> None:
        self.phase = phase
        self.bundle = bundle
        super().__init__(message)


class EngineCrashedError(EngineError):
    """The engine process died (abort, segfault) while loading or running the artifact."""


class CheckMismatchError(CheckError):
    """The engine's outputs differ from PyTorch's beyond the tolerance."""

    def __init__(self, message: str, report: object = None, bundle: str | None = None,
                 *, note: str = "") -> None:
        self.report = report
        self.bundle = bundle
        if note:
            message += f"\n{note}"
        elif bundle:
            message += f"\nDebug bundle written to {bundle}"
        super().__init__(message)


# -- writing artifacts: what may be replaced, and file-system faults while writing


class OverwriteRefusedError(SerializationError, InvalidArgumentError):
    """The destination holds something t2n did not write (a user's folder or file, a
    link); it is left untouched unless the caller passes ``overwrite=True``."""


class ArtifactWriteError(SerializationError, OSError):
    """The file system refused a write (disk full, read-only, name too long...).

    Also an ``OSError`` with the ``errno`` of the failure, so ``except OSError`` clauses
    keep working; the original ``OSError`` is the ``__cause__``.
    """

    def __init__(self, message: str, cause: OSError | None = None) -> None:
        super().__init__(message)
        if cause is not None:
            self.errno, self.strerror, self.filename = cause.errno, cause.strerror, cause.filename

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


# -- tracing semantics: what the trace specialised, state the forward wrote, weights changed


class SpecializedTraceError(TraceError):
    """``compile(..., strict=True)``: the trace took values from the example inputs' data
    (Python control flow on tensors, ``.item()``...); every such place is listed."""

    def __init__(self, message: str, places: Sequence[str] = ()) -> None:
        self.places = list(places)
        super().__init__(message)


class UntracedEffectError(TraceError):
    """``compile(..., strict=True)``: the traced graph, run on the example inputs, does
    not compute what ``forward`` returned (something ``forward`` did is not in the trace,
    such as a write through ``.data``); each differing output is named."""


class StateMutationError(TraceError):
    """The forward writes a parameter or buffer in a way whose effect on the traced call
    cannot be exported exactly (named with its module path, aten op and source line)."""


class WeightsChangedError(SerializationError):
    """Parameters or buffers the artifact was compiled from changed after ``compile``
    (in place, through ``.data`` or ``load_state_dict``); nothing is written."""

    def __init__(self, message: str, names: Sequence[str] = ()) -> None:
        self.names = list(names)
        super().__init__(message)


# IR and NNEF emission: errors of the IR's own API and of emitters.
class IRError(T2NError):
    """The IR was built or edited wrongly (an edit, a dimension, a graph that breaks an
    invariant). The IR's own classes also keep their Python base (ValueError, ...)."""


class StaleArtifactError(IRError):
    """An artifact's IR was edited after it was rendered: its ``graph.nnef`` no longer
    says what the IR does. A change to an artifact is a pass of ``compile``."""


class IRLookupError(IRError, KeyError):
    """A name the IR does not know (an op kind, a symbol without a value) or holds twice."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class EmissionError(T2NError):
    """An emitter failed to write an IR op as NNEF (a bad attribute, a bug in the
    emitter). Names the op and where it came from; the emitter's exception is the cause."""

    def __init__(self, message: str, *, op: str = "", module: str = "", source: str = "") -> None:
        self.op = op
        self.module = module
        self.source = source
        super().__init__(message)


# -- frontend: installed torch and user extensions of the trace


class UnsupportedTorchError(T2NError, ImportError):
    """The installed torch is outside the range whose private tracer APIs t2n uses
    (named with the version found and the range supported)."""


class ExtractorError(TraceError):
    """A module extractor was given or used wrongly (named with the module class, its
    path in the model and what to change)."""


# -- input/output names and naming schemes -------------------------------------------
class IONamesMismatchError(InvalidArgumentError):
    """``input_names``/``output_names`` do not match the tensors the trace kept (a name
    for ``None``, an int or another non-tensor argument or output)."""


class SameIONameError(InvalidArgumentError):
    """An output named like an input where that cannot be: not allowed, not the input
    unchanged, or on a target that cannot express it."""


# -- tract versions: environments holding another tract release


class TractEnvironmentError(EngineError):
    """The environment holding a given tract version could not be made or started
    (named with the version, the folder and what pip or the system said)."""


# -- scripted loops


class DataDependentLoopError(TraceError):
    """A TorchScript loop runs a number of times that the input data decides (not the
    sizes of the example inputs), so no exported graph can follow it. ``places`` holds
    each such loop's source line."""

    def __init__(self, message: str, places: Sequence[str] = ()) -> None:
        self.places = list(places)
        super().__init__(message)


# -- LLM export


class CheckpointFolderError(InvalidArgumentError):
    """A checkpoint folder given to ``t2n.llm`` lacks what an export needs (its
    ``config.json`` or its ``*.safetensors`` weights), or they cannot be read."""


class UnsupportedArchitectureError(InvalidArgumentError):
    """A model whose architecture ``t2n.llm`` cannot export as a causal LM (named in
    ``architecture``)."""

    def __init__(self, message: str, architecture: str = "") -> None:
        self.architecture = architecture
        super().__init__(message)


# -- LLM adapters (peft)


class AdapterError(CheckpointFolderError):
    """A LoRA/DoRA adapter (a ``peft`` folder or file) that cannot be exported or merged:
    no ``adapter_config.json`` or weights, or tensors that do not fit the base model."""


# -- LLM checkpoints read without loading them


class CorruptCheckpointError(CheckpointFolderError, CorruptTensorFileError):
    """A safetensors shard of a checkpoint folder is truncated or has a corrupt header,
    or its index names a shard that is not there (named with the file)."""


# -- torch.export frontend: constructs it refuses, sizes it specialised


class ExportFrontendError(TraceError):
    """``torch.export`` cannot give t2n a graph for the model (control flow such as
    ``torch.cond``, a scripted module, a data-dependent value or shape, a Python
    construct it does not trace). Names the ``construct`` and the user's ``source``
    line where known, and suggests the other frontend."""

    def __init__(self, message: str, *, construct: str = "", source: str = "") -> None:
        self.construct = construct
        self.source = source
        super().__init__(message)


class ExportSpecializationError(ExportFrontendError, DynamicAxesError):
    """A size asked to be dynamic that ``torch.export`` fixed to a constant (its
    constraint violation), named by ``input`` and ``axis`` with torch's reason."""

    def __init__(self, message: str, *, input: str = "", axis: int | None = None, reason: str = "") -> None:
        self.input = input
        self.axis = axis
        self.reason = reason
        super().__init__(message, construct="a specialised dynamic size")


class ScriptedModelExportError(ExportFrontendError, InvalidArgumentError):
    """A TorchScript model given with ``frontend="export"``: torch.export traces Python
    code, which a scripted module no longer has (``frontend="jit"`` takes it)."""


# -- weights that make a model meaningless


class NonFiniteWeightError(InvalidArgumentError):
    """``strict=True``: weights of the artifact hold NaN or infinite values (or values that
    become infinite in the dtype they are written in); ``names`` lists each tensor."""

    def __init__(self, message: str, names: Sequence[str] = ()) -> None:
        self.names = list(names)
        super().__init__(message)


class SymbolBoundsError(CheckError, InvalidArgumentError):
    """The inputs of a check give the artifact's symbols sizes that its ``tract_assert``
    lines exclude (tract reads those lines but does not enforce them); ``assertions``
    lists each one broken and ``symbols`` the sizes found."""

    def __init__(self, message: str, assertions: Sequence[str] = (), symbols: dict[str, int] | None = None) -> None:
        self.assertions = list(assertions)
        self.symbols = dict(symbols or {})
        super().__init__(message)


# -- TorchScript hardening: attribute state, self-check


class AttributeStateError(TraceError):
    """A scripted forward keeps state in module attributes in a way no exported graph can
    follow (an attribute that decides what it computes and that the call changes, state
    of a type t2n cannot carry between calls). ``attributes`` names each one by its
    dotted path."""

    def __init__(self, message: str, attributes: Sequence[str] = ()) -> None:
        self.attributes = list(attributes)
        super().__init__(message)


class HardeningMismatchError(TraceError):
    """The graph JIT hardening made for the example inputs does not compute what the
    scripted model computes on them (from the same starting state): nothing is written.
    ``outputs`` names each output that differs, with its largest difference."""

    def __init__(self, message: str, outputs: Sequence[str] = ()) -> None:
        self.outputs = list(outputs)
        super().__init__(message)


# -- reading NNEF back, and remodelling an artifact's interface


class NNEFReadError(SerializationError):
    """An NNEF document or artifact cannot be read into the IR: its text does not parse,
    a variable's tensor file is missing or disagrees with it, or it calls operations t2n
    does not know (``problems`` lists every one of them)."""

    def __init__(self, message: str, problems: Sequence[str] = ()) -> None:
        self.problems = list(problems)
        if problems:
            message += "\n" + "\n".join(f"  - {p}" for p in problems)
        super().__init__(message)


class NNEFSyntaxError(NNEFReadError, ValueError):
    """graph.nnef (or graph.quant) text that is not NNEF; the message names the line."""


class RemodelPlanError(InvalidArgumentError):
    """A remodel plan is malformed or does not fit the graph it is applied to; ``key``
    is where in the plan (``encoder.inputs.audio.collapse_dims``)."""

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        super().__init__(f"remodel plan, {key}: {message}" if key else f"remodel plan: {message}")


# -- NeMo speech recognizers (t2n.nemo)


class NemoUnavailableError(T2NError, ImportError):
    """NeMo (``nemo-toolkit[asr]``) is not installed: ``pip install 't2n[nemo]'``."""


class NemoExportError(InvalidArgumentError):
    """A NeMo model, or a part of it, that t2n.nemo does not export as it is; ``part``
    names the sub-network (``preprocessor``, ``encoder``, ``ctc_decoder``, ``decoder``,
    ``joint``) or ``model``, and the message what to do."""

    def __init__(self, part: str, message: str) -> None:
        self.part = part
        super().__init__(f"NeMo {part}: {message}")


class NemoManifestError(SerializationError, ValueError):
    """A folder that is not a NeMo export t2n wrote: no ``manifest.json``, another format
    or version, or an artifact it lists is missing; or an export asked for what its
    manifest cannot give (the text of a tokenizer t2n does not follow)."""


class NemoArchiveError(NemoExportError):
    """A ``.nemo`` file that cannot be restored: not a tar archive, truncated, or a tar
    without NeMo's ``model_config.yaml`` (named with the file and what to do)."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        super().__init__("model", message)


class NemoAudioError(InvalidArgumentError):
    """Audio a NeMo export cannot transcribe: a file that is not a readable ``.wav`` or
    ``.npy``, another channel count or sample rate than the model's, samples that are not
    float; ``source`` names the file (or ``"the audio"``)."""

    def __init__(self, source: str, message: str) -> None:
        self.source = source
        super().__init__(f"{source}: {message}")


class AudioLengthError(NemoAudioError):
    """Audio shorter or longer than a NeMo export accepts (the bounds its manifest states,
    such as the encoder's positional table): ``seconds`` is its length, ``min_seconds``
    and ``max_seconds`` (``None`` when unbounded) what the export accepts."""

    def __init__(self, source: str, message: str, *, seconds: float, min_seconds: float,
                 max_seconds: float | None) -> None:
        self.seconds = seconds
        self.min_seconds = min_seconds
        self.max_seconds = max_seconds
        super().__init__(source, message)
