"""Measuring tools: resident memory (current and peak, resettable), raw writes, a
streaming safetensors writer, and the machine's facts."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch

CHUNK = 64 << 20


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def rss() -> int:
    """Resident memory now, in bytes."""
    return _status("VmRSS")


def peak_rss() -> int:
    """Peak resident memory since the last :func:`reset_peak` (or the process start)."""
    return _status("VmHWM")


def quiesce() -> None:
    """Let the disk finish what earlier steps left in the page cache (not timed), so that
    every timed write starts on an idle disk: a checkpoint written without fsync by the
    previous scenario otherwise slows the next write by several times."""
    os.sync()


_PRIMER: Callable[[], None] | None = None


def set_primer(buffers: Iterable[memoryview] | None, folder: Path | None = None) -> None:
    """Before every timed step from now on, write ``buffers`` to a scratch file under
    ``folder`` without fsync and delete it (not timed); ``None`` turns that off.

    Why: on this virtual machine, memory the guest freed a few seconds ago is handed back
    to the host, and the next write that needs it as page cache pays for the host to
    provide it again: ``write()`` of 1.6 GiB takes 4-5 s on such memory against 0.4 s on
    memory freed just before (the fsync costs the same, ~0.65 s). Priming puts every raw
    write and every export on recently freed memory, the machine's fast case, so that
    they are compared in the same state (the report also measures the cold case)."""
    global _PRIMER
    if buffers is None or folder is None:
        _PRIMER = None
        return
    bufs, path = list(buffers), folder / "prime.bin"

    def write_and_delete() -> None:
        raw_write(path, bufs, sync=False, primed=False)
        path.unlink()

    _PRIMER = write_and_delete


def prime() -> None:
    if _PRIMER is not None:
        _PRIMER()


def settle_cold(seconds: float = 12.0) -> None:
    """Let memory freed by earlier steps go back to the host (the cold case of
    :func:`set_primer`): flush, then stay idle."""
    os.sync()
    time.sleep(seconds)


def reset_peak() -> None:
    """Start a new peak-RSS window (Linux: writing 5 to /proc/self/clear_refs)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


class Phase:
    """Times a block and records its peak RSS (a fresh window) in ``results[name]``."""

    def __init__(self, results: dict[str, Any], name: str, cold: bool = False) -> None:
        self.results, self.name, self.cold = results, name, cold

    def __enter__(self) -> Phase:
        if self.cold:
            settle_cold()
        else:
            prime()
            quiesce()
        reset_peak()
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.start
        self.results[self.name] = {"seconds": self.seconds, "peak_rss": peak_rss(), "rss_after": rss()}


def tensor_bytes(t: torch.Tensor) -> memoryview:
    t = t.detach()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return memoryview(np.ascontiguousarray(t.numpy())).cast("B")


def raw_write(path: Path, buffers: Iterable[memoryview], sync: bool = True,
              primed: bool = True, settle: bool = True) -> tuple[float, int]:
    """Write ``buffers`` to one file with large sequential writes (then fsync): the
    fastest this process can put these bytes on this disk. Returns (seconds, bytes).
    Primed (see :func:`set_primer`) and on an idle disk unless told otherwise."""
    n = 0
    if primed:
        prime()
    if settle:
        quiesce()
    t0 = time.perf_counter()
    with open(path, "wb", buffering=0) as f:
        for buf in buffers:
            for i in range(0, len(buf), CHUNK):
                n += f.write(buf[i : i + CHUNK])
        if sync:
            os.fsync(f.fileno())
    return time.perf_counter() - t0, n


def fsync_tree(path: Path) -> None:
    for p in [path] if path.is_file() else path.rglob("*"):
        if p.is_file():
            with open(p, "rb") as f:
                os.fsync(f.fileno())


def remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


_ST_DTYPE = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}


def write_safetensors_streaming(
    path: Path, specs: list[tuple[str, tuple[int, ...], torch.dtype]],
    make: Callable[[str, tuple[int, ...], torch.dtype], torch.Tensor],
) -> int:
    """Write a safetensors file whose tensors are made one at a time by ``make`` (never
    more than one in memory). Returns the file size."""
    header: dict[str, Any] = {}
    offset = 0
    for name, shape, dtype in specs:
        n = int(np.prod(shape)) * torch.empty(0, dtype=dtype).element_size()
        header[name] = {"dtype": _ST_DTYPE[dtype], "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb", buffering=0) as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for name, shape, dtype in specs:
            t = make(name, shape, dtype)
            buf = tensor_bytes(t)
            for i in range(0, len(buf), CHUNK):
                f.write(buf[i : i + CHUNK])
            del t, buf
        os.fsync(f.fileno())
    return 8 + len(text) + offset


def machine_facts(folder: Path) -> dict[str, Any]:
    facts: dict[str, Any] = {
        "python": platform.python_version(), "torch": torch.__version__, "os": platform.platform(),
        "cpus": os.cpu_count(),
    }
    try:
        with open("/proc/cpuinfo") as f:
            facts["cpu"] = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
        with open("/proc/meminfo") as f:
            facts["ram_gib"] = round(int(f.readline().split()[1]) / 2**20, 1)
    except (OSError, StopIteration):
        pass
    usage = shutil.disk_usage(folder)
    facts["disk_free_gib"] = round(usage.free / 2**30, 1)
    try:
        dev = os.stat(folder).st_dev
        with open("/proc/self/mountinfo") as f:
            for line in f:
                parts = line.split()
                major, minor = (int(x) for x in parts[2].split(":"))
                if os.makedev(major, minor) == dev:
                    sep = parts.index("-")
                    facts["filesystem"] = f"{parts[sep + 1]} on {parts[sep + 2]} (mounted at {parts[4]})"
    except (OSError, ValueError):
        pass
    facts["load_average"] = os.getloadavg()
    for mod in ("isal", "zlib_ng", "tract", "transformers", "numpy"):
        with contextlib.suppress(ImportError, AttributeError):
            facts[mod] = __import__(mod).__version__
    return facts


def replace_section(path: Path, heading: str, text: str, title: str) -> None:
    """Replace the section of ``path`` that starts with ``heading`` (up to the next
    ``## `` heading) by ``text``, or append it; a new file starts with ``title``. Lets
    several benchmarks share one results file, each rewriting only its own section."""
    old = path.read_text() if path.exists() else f"{title}\n\n"
    start = old.find(heading)
    if start < 0:
        new = old.rstrip("\n") + "\n\n" + text
    else:
        end = old.find("\n## ", start + len(heading))
        rest = old[end + 1:] if end >= 0 else ""
        new = old[:start] + (text.rstrip("\n") + "\n\n" + rest if rest else text)
    path.write_text(new)


def child(args: dict[str, Any], timeout: float = 3600) -> dict[str, Any]:
    """Run one scenario of :mod:`benchmarks.scenarios` in a fresh Python; its RESULT."""
    print(f"-- {args['scenario']} {json.dumps({k: v for k, v in args.items() if k != 'scenario'})}",
          file=sys.stderr, flush=True)
    done = subprocess.run([sys.executable, "-m", "benchmarks.scenarios", json.dumps(args)], cwd=Path(__file__).resolve().parent.parent,
                          stdout=subprocess.PIPE, text=True, timeout=timeout)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"scenario {args['scenario']} failed (exit {done.returncode}):\n{done.stdout[-3000:]}")
    return json.loads(lines[-1][len("RESULT "):])
