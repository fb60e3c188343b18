"""Writing weights while the model compiles (``t2n.export``).

Compiling is CPU work and writing weights is disk work, so they can overlap: before
the compile starts, :class:`EarlyWriter` starts a thread that writes the tensors the
artifact will most likely hold (a model's parameters, under the names the compiler
gives them) zero-copy from their memory. Once the compile is done, its tensor list is
the truth. The early members are kept up to the first one the artifact does not hold
exactly as written (unused, transformed by a pass such as batch-norm folding, written
in another dtype, or modified in place since it was written); the archive is cut back
there (:meth:`ArtifactWriter.rollback`) and the rest is written in a fixed order: the
predicted tensors the artifact holds, in prediction order, then the others, in the
artifact's order. So the bytes never depend on how far the thread got.

Whether a member is "exactly as written" is decided without reading it again: both
sides refer to the same memory (same address, shape, strides and dtype, through the
same conversions; see :func:`data_key`), and the owner's ``unchanged()`` check (for
PyTorch tensors, their version counter and a fingerprint of sampled values, since the
counter misses writes through ``.data``) says nobody wrote to it since. Where even
that cannot be trusted (a parameter the traced forward wrote, e.g. through ``.data``
on its first call: the member may hold the value from before the call), the caller
names the member in ``finish(rewrite=...)`` and it is written again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

import attrs

from t2n.ir import ArrayData, DType, LazyData, TensorData
from t2n.ir.tensor_data import ConvertedData, chunk_nbytes
from t2n.quant.q4_0 import Q40Data
from t2n.serialize.archive import ArtifactWriter
from t2n.serialize.dat import dat_size, iter_dat, make_header
from t2n.serialize.progress import Progress


def data_key(data: TensorData) -> tuple[Any, ...] | None:
    """What makes two tensor data the same bytes without reading them: the memory they
    view (or the lazy reader object itself) and the conversions on the way; None when
    that cannot be told (e.g. symbolic data)."""
    if isinstance(data, ArrayData):
        if data.is_symbolic:
            return None
        a = data.array
        return ("array", a.__array_interface__["data"][0], a.shape, a.strides, a.dtype.str, data.dtype)
    if isinstance(data, ConvertedData):
        inner = data_key(data.source)
        return None if inner is None else ("converted", data.dtype, inner)
    if isinstance(data, Q40Data):  # a Q4_0 weight: the same values and the same scales
        inner = data_key(data.source)
        return None if inner is None else ("q4_0", data.scales.__array_interface__["data"][0], inner)
    if isinstance(data, LazyData):  # the same reader object (kept alive by both sides)
        return ("lazy", id(data), data.dtype, data.shape)
    return None


@attrs.frozen
class PlannedTensor:
    """A tensor the artifact will probably hold: its member path, data and dtype written."""

    path: str
    data: TensorData
    dtype: DType
    unchanged: Callable[[], bool] = attrs.field(default=lambda: True, eq=False)
    """True while the data is still what was written (e.g. a version counter check)."""

    @property
    def key(self) -> tuple[Any, ...] | None:
        return data_key(self.data)


class _HasPath(Protocol):
    @property
    def path(self) -> str: ...


_F = TypeVar("_F", bound=_HasPath)


class _Stopped(Exception):
    """Raised inside the writing thread when the export is abandoned."""


class EarlyWriter:
    """Writes ``planned`` tensors into ``writer`` on a thread until told to stop.

    ``order`` (default: the planned paths) is the artifact's fixed order of tensors,
    of which the planned ones are a subsequence.

    Use: ``start()``, compile, then either ``finish(final)`` (which joins the thread,
    cuts back what the compile did not confirm, and returns the tensors still to write
    in their fixed order) or ``cancel()`` when the compile failed.
    """

    def __init__(self, writer: ArtifactWriter, planned: Sequence[PlannedTensor],
                 progress: Progress | None = None, order: Sequence[str] | None = None) -> None:
        if not writer.can_rollback:
            raise ValueError(f"{type(writer).__name__} cannot take members back; write after compiling")
        seen: set[str] = set()
        self.planned: list[PlannedTensor] = []
        for p in planned:
            if p.key is not None and p.path not in seen:
                seen.add(p.path)
                make_header(p.dtype, p.data.shape)  # a tensor the format cannot hold: refused now
                self.planned.append(p)
        self.writer = writer
        self.progress = progress
        self.order = list(dict.fromkeys(order)) if order is not None else [p.path for p in self.planned]
        if [q for q in self.order if q in seen] != [p.path for p in self.planned]:
            raise ValueError("planned tensors must follow the given order")
        self.written: list[tuple[PlannedTensor, int]] = []  # (tensor, writer mark before it)
        self.error: BaseException | None = None
        self.kept = 0
        self.kept_bytes = 0
        self._stop = threading.Event()
        self._abandon = threading.Event()
        self._thread = threading.Thread(target=self._run, name="t2n-early-writer", daemon=True)

    def start(self) -> EarlyWriter:
        self._thread.start()
        return self

    def _chunks(self, chunks: Iterable[Any]) -> Iterator[Any]:
        for c in chunks:
            if self._abandon.is_set():
                raise _Stopped
            yield c
            if self.progress is not None:
                self.progress.update(chunk_nbytes(c))

    def _run(self) -> None:
        try:
            for p in self.planned:
                if self._stop.is_set():
                    return
                mark = self.writer.mark()
                self.written.append((p, mark))
                self.writer.add_stream(p.path, dat_size(p.data, p.dtype), self._chunks(iter_dat(p.data, p.dtype, regions=True)))
        except _Stopped:
            pass
        except BaseException as exc:  # reported by finish()
            self.error = exc

    def cancel(self) -> None:
        """Abandon at once (mid-member): the caller aborts the writer."""
        self._stop.set()
        self._abandon.set()
        self._thread.join()

    def finish(self, final: Sequence[Any], *, write_all_planned: bool = False,
               rewrite: Collection[str] = ()) -> list[Any]:
        """Stop after the member being written, keep what ``final`` confirms, and return
        the items of ``final`` (objects with ``path``, ``data`` and ``dtype``) still to
        write, in the fixed order. Raises what the thread raised (e.g. a full disk).
        ``rewrite``: paths whose early member is never kept (their owner's checks cannot
        tell whether it still holds what was written).

        ``write_all_planned`` lets the thread write every planned tensor first (tests use
        it to make what is written early independent of timing)."""
        if not write_all_planned:
            self._stop.set()
        self._thread.join()
        if self.error is not None:
            raise self.error
        by_path = {f.path: f for f in final}
        kept = 0
        for p, _ in self.written:
            f = by_path.get(p.path)
            if f is None or f.dtype is not p.dtype or data_key(f.data) != p.key or not p.unchanged() \
                    or p.path in rewrite:
                break
            kept += 1
        self.kept = kept
        self.kept_bytes = sum(dat_size(p.data, p.dtype) for p, _ in self.written[:kept])
        if kept < len(self.written):
            self.writer.rollback(self.written[kept][1])
            if self.progress is not None:
                self.progress.done = self.kept_bytes
        done = {p.path for p, _ in self.written[:kept]}
        return [f for f in ordered_like(final, self.order) if f.path not in done]


def ordered_like(final: Sequence[_F], planned_paths: Sequence[str]) -> list[_F]:
    """``final`` in the artifact's fixed order: the tensors at ``planned_paths`` first, in
    that order, then the others in their own order. ``t2n.compile`` orders an artifact's
    tensors this way too, so ``export`` and ``compile(...).save`` write the same bytes."""
    by_path = {f.path: f for f in final}
    order = [path for path in planned_paths if path in by_path] + [f.path for f in final]
    return [by_path[path] for path in dict.fromkeys(order)]


__all__ = ["EarlyWriter", "PlannedTensor", "data_key", "ordered_like"]
