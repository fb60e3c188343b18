"""What ``compile`` returns: the IR, the rendered NNEF, the tensors, and PyTorch's
reference outputs, ready to be saved and checked."""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from t2n.backends.nnef.context import TensorFile
from t2n.backends.nnef.renderer import RenderedModel
from t2n.backends.running import run_on_target
from t2n.backends.target import Target
from t2n.check.assertions import assertions_of, check_bounds, input_shapes_of
from t2n.check.bundle import BundleContent, BundleResult, got_names, replay_spec, write_bundle
from t2n.check.compare import CheckReport, Tolerance, compare
from t2n.errors import CheckMismatchError, EngineError, InvalidArgumentError, StaleArtifactError
from t2n.ir import Graph, print_graph
from t2n.serialize.archive import artifact_form, open_writer, read_artifact
from t2n.serialize.dat import dat_size, iter_dat
from t2n.serialize.progress import Progress

log = logging.getLogger("t2n")


@attrs.define(eq=False)
class Artifact:
    """An exported model. ``save`` writes it; ``check`` runs it in the target's engine."""

    ir: Graph
    target: Target
    rendered: RenderedModel
    input_names: list[str]
    output_names: list[str]
    example_inputs: list[np.ndarray]
    reference_outputs: list[np.ndarray]
    saved_path: Path | None = None
    stats: dict[str, Any] = attrs.field(factory=dict)
    debug_bundle_path: Path | None = None
    """Where a failed :meth:`check` writes its debug bundle (``compile(debug_bundle_path=...)``)."""
    ir_stages: list[tuple[str, str]] = attrs.field(factory=list)
    """The IR after each pass, recorded for debug bundles when ``debug_bundle_path`` is set."""
    _rendered_at: int = attrs.field(init=False, default=-1)
    """The IR's edit count when it was rendered: :meth:`save` and :meth:`check` refuse an
    IR edited since (what is written must be what was rendered, named and guarded)."""

    def __attrs_post_init__(self) -> None:
        self._rendered_at = self.ir.edits

    def _refuse_stale(self, doing: str) -> None:
        edits = self.ir.edits - self._rendered_at
        if edits:
            raise StaleArtifactError(
                f"cannot {doing}: the artifact's IR was edited {edits} time(s) after it was rendered, so its "
                "graph.nnef no longer says what the IR does; make the change a pass of compile "
                "(passes=[...], or an interface pass for inputs and outputs) so that it is rendered and "
                "checked with the rest")

    @property
    def graph_nnef(self) -> str:
        return self.rendered.graph_nnef

    @property
    def tensor_files(self) -> list[str]:
        return [t.path for t in self.rendered.tensors]

    def members(
        self, tensors: Sequence[TensorFile] | None = None
    ) -> Iterator[tuple[str, int, Iterator[Any]]]:
        """(name, size, byte chunks) of the tensor files (``tensors``, or all of them in
        the artifact's order), then ``graph.nnef`` (and ``graph.quant``).

        Every tensor's header is made before the first member is produced, so a tensor
        the .dat format cannot hold is refused before anything is written. The graph
        comes last so that ``t2n.export`` can write the weights while the model compiles
        and still give the same bytes as ``save``.
        """
        files: list[tuple[str, int, Iterator[Any]]] = []
        for t in self.rendered.tensors if tensors is None else tensors:
            files.append((t.path, dat_size(t.data, t.dtype), iter_dat(t.data, t.dtype, regions=True, name=t.path)))
        text = self.rendered.graph_nnef.encode()
        files.append(("graph.nnef", len(text), iter([text])))
        if self.rendered.graph_quant:
            q = self.rendered.graph_quant.encode()
            files.append(("graph.quant", len(q), iter([q])))
        return iter(files)

    def save(
        self,
        path: str | os.PathLike[str],
        compression_level: int | None = None,
        *,
        progress: bool | None = None,
        sync: bool = False,
        overwrite: bool = False,
    ) -> Path:
        """Write the artifact as a directory, ``.tar`` or ``.tgz`` (by suffix, or
        ``compression_level``: 0 → tar, 1..9 → tgz). Atomic: on failure (an error, a
        full disk, Ctrl-C) nothing is left. Weights stream from where they live (the
        model's memory, or the disk for ``weights_from``) straight into the artifact.

        ``progress``: a progress bar on stderr (``None``: only when it is a terminal and
        the weights are large; progress is also logged at INFO level either way).
        ``sync=True`` flushes the files to the disk before the artifact is renamed into place.

        What is at ``path`` is replaced only if t2n wrote it (an artifact folder, ``.tar``
        or ``.tgz``; see :mod:`t2n.serialize.destination`); anything else (a folder with
        other files, another file, a link) raises ``OverwriteRefusedError`` and is left
        untouched, unless ``overwrite=True``. A full disk, a read-only folder or a name
        too long raise ``ArtifactWriteError`` (an ``OSError`` too). SIGTERM while saving
        is handled like Ctrl-C: the temporary files are removed first.

        Args:
            path: a directory, or a ``.tar``/``.tgz`` archive.
            compression_level: 0 (a ``.tar``) to 9; ``None``: by the suffix.
            progress: a progress bar on stderr (``None``: only on a terminal, for large
                weights).
            sync: flush the files to the disk before the artifact is renamed into place.
            overwrite: replace what is at ``path`` even if t2n did not write it.

        Returns:
            The path written.
        """
        self._refuse_stale("save it")
        p = Path(path)
        members = list(self.members())
        total = sum(size for _, size, _ in members)
        t0 = time.perf_counter()
        with Progress(total, f"writing {p.name}", bar=progress) as bar, \
                open_writer(p, compression_level, sync=sync, overwrite=overwrite) as w:
            for name, size, chunks in members:
                w.add_stream(name, size, bar.track(chunks))
        self.saved_path = p
        self.stats["bytes_written"] = w.bytes_written
        self.stats.setdefault("timings", {})["save"] = time.perf_counter() - t0
        if w.compressor_name:
            self.stats["compressor"] = w.compressor_name
            log.info("compressed with %s", w.compressor_name)
        log.info("saved %s (%d bytes of members)", p, w.bytes_written)
        return p

    def check(
        self,
        tolerance: Tolerance | str = Tolerance.APPROXIMATE,
        *,
        inputs: Sequence[np.ndarray] | None = None,
        expected: Sequence[np.ndarray] | None = None,
        symbols: Mapping[str, int] | None = None,
        debug_dir: str | os.PathLike[str] | None = None,
    ) -> CheckReport:
        """Run the artifact in the target's engine and compare with PyTorch.

        By default the example inputs and the outputs PyTorch computed at export are
        used; pass ``inputs`` and ``expected`` to check other values. Raises
        :class:`CheckMismatchError` when outputs differ, and :class:`EngineCrashedError`
        (with the phase: loading, optimizing or running) when the engine dies, or
        :class:`EngineError` (with the phase) when it refuses the artifact; all
        write a debug bundle to ``debug_dir`` (default: the compile's ``debug_bundle_path``,
        else a new temporary folder; a ``.tgz``/``.tar`` path gives one archive) and name
        it in the message. A ``debug_dir`` that cannot be written, or that holds something
        t2n did not write (only an empty folder or a previous bundle is replaced), never
        replaces the error: the message says why and where the bundle went instead.

        Args:
            tolerance: tract's levels ``exact``, ``close``, ``approximate`` (the
                default), ``very``, ``super``, ``ultra``, t2n's ``loose``, ``very_loose``,
                or a ``Tolerance``.
            inputs: other inputs to run, in ``input_names`` order (with ``expected``).
            expected: PyTorch's outputs for ``inputs``, in ``output_names`` order.
            symbols: sizes of symbols the inputs' shapes do not give, passed to the engine;
                every size is checked against the artifact's ``tract_assert`` lines
                (``SymbolBoundsError`` when one is broken).
            debug_dir: where a failure writes its debug bundle.

        Returns:
            The comparison's report (largest differences per output).
        """
        if (inputs is None) != (expected is None):
            raise InvalidArgumentError("check(): give both inputs and expected, or neither")
        self._refuse_stale("check it")
        tolerance = Tolerance.parse(tolerance)
        debug_dir = debug_dir if debug_dir is not None else self.debug_bundle_path
        ins, refs = self._values_to_check(inputs, expected)
        text = self.rendered.graph_nnef
        check_bounds(assertions_of(text), input_shapes_of(text), self.input_names, ins, symbols, "the artifact")
        report = self._run_and_compare(ins, refs, tolerance, symbols, debug_dir)
        log.info("%s", report)
        return report

    def _values_to_check(self, inputs: Sequence[np.ndarray] | None,
                         expected: Sequence[np.ndarray] | None) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """The inputs to run and the outputs to expect: the caller's, checked against the
        artifact's names, else those of the export (none when it traced on the meta device,
        which the caller is told to fill)."""
        if inputs is not None and expected is not None:
            _check_arrays(self.input_names, inputs, "input", "inputs")
            _check_arrays(self.output_names, expected, "output", "expected")
        ins = [np.asarray(x) for x in (inputs if inputs is not None else self.example_inputs)]
        refs = [np.asarray(x) for x in (expected if expected is not None else self.reference_outputs)]
        if not refs and self.output_names:
            raise InvalidArgumentError(
                "check(): no PyTorch reference outputs (the model was traced on the meta "
                "device); pass inputs= and expected="
            )
        return ins, refs

    def _run_and_compare(self, ins: list[np.ndarray], refs: list[np.ndarray], tolerance: Tolerance,
                         symbols: Mapping[str, int] | None,
                         debug_dir: str | os.PathLike[str] | None) -> CheckReport:
        """One run in the target's engine compared with ``refs``; a failed run of the
        artifact or a mismatch writes a debug bundle and names it in the error raised."""
        with tempfile.TemporaryDirectory(prefix="t2n-check-") as tmp:
            path = self._engine_path(Path(tmp))
            try:
                outputs = run_on_target(self.target, path, ins, registries=self.rendered.registries,
                                        symbols=symbols)
            except EngineError as exc:
                if not exc.phase:  # not a run of the artifact (no engine installed, a target's bug)
                    raise
                bundle = self._debug_bundle(path, ins, refs, None, str(exc), debug_dir,
                                            replay_spec(self, path, tolerance, symbols))
                exc.bundle = bundle.path
                exc.args = (f"{exc}\n{bundle.note}",)
                raise
            report = compare(self.target.engine, self.output_names, outputs, refs, tolerance)
            if not report.ok:
                bundle = self._debug_bundle(path, ins, refs, outputs, str(report), debug_dir,
                                            replay_spec(self, path, tolerance, symbols))
                raise CheckMismatchError(str(report) + self.nonfinite_weights_note(), report, bundle.path, note=bundle.note)
        return report

    def nonfinite_weights_note(self) -> str:
        """The weights found not finite when compiling (the likely cause of a mismatch)."""
        found = self.stats.get("nonfinite_weights") or []
        if not found:
            return ""
        more = f"; and {len(found) - 10} more" if len(found) > 10 else ""
        return f"\nWeights that are not finite (the likely cause): {'; '.join(found[:10])}{more}"

    def _engine_path(self, tmp: Path) -> Path:
        saved = self.saved_path
        if saved is not None and saved.exists():
            form, _ = artifact_form(saved)
            if form == "dir" or self.target.reads_archives:
                return saved
            out = tmp / "model"
            out.mkdir()
            for name, data in read_artifact(saved).items():
                (out / name).parent.mkdir(parents=True, exist_ok=True)
                (out / name).write_bytes(data)
            return out
        out = tmp / "model"
        with open_writer(out) as w:
            for name, size, chunks in self.members():
                w.add_stream(name, size, chunks)
        return out

    def _debug_bundle(self, path: Path, ins: list[np.ndarray], refs: list[np.ndarray],
                      got: list[np.ndarray] | None, what: str,
                      debug_dir: str | os.PathLike[str] | None, replay: Mapping[str, Any]) -> BundleResult:
        content = BundleContent(
            model=path,
            inputs=dict(zip(self.input_names, ins)),
            expected=dict(zip(self.output_names, refs)),
            got=None if got is None else dict(zip(got_names(self.output_names, len(got)), got)),
            ir_text=print_graph(self.ir, with_locs=True),
            report_text=what,
            ir_stages=self.ir_stages,
            replay=replay,
        )
        return write_bundle(content, debug_dir)


def _check_arrays(names: Sequence[str], given: object, what: str, argument: str) -> None:
    """``inputs=``/``expected=`` of ``check`` hold one array per model input/output."""
    if isinstance(given, (str, bytes, Mapping, np.ndarray)) or not isinstance(given, Sequence):
        raise InvalidArgumentError(
            f"check(): {argument} must be a list of arrays (one per model {what}), got {type(given).__name__}"
        )
    if len(given) != len(names):
        raise InvalidArgumentError(
            f"check(): {argument} has {len(given)} arrays but the model has {len(names)} "
            f"{what}s ({', '.join(names) or 'none'}); give one array per {what}, in that order"
        )

