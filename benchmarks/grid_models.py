"""The models of the artifact-speed grid (:mod:`benchmarks.artifact_grid`), one per cell,
built from the cell's text (``"upsample mode=nearest dims=2 f=2 c=32 s=128 n=1 conv=0
spell=scale"``).

Like :mod:`benchmarks.speed_models`, this module imports only torch: the other exporter's
virtual environment rebuilds each cell from its text and loads the weights t2n's side
saved, so that every exporter compiles the same model.

Each family is one layer (or a short block) whose form t2n chooses, optionally preceded
by a convolution (``conv=1``: a 3-wide convolution of ``c`` channels to ``c`` channels,
same padding) because a layer in front changes what tract's optimiser does with the form
(it fuses some into the layer's product, or fails to). The ``sort`` family exports its
sorted axis as a symbol (:func:`dynamic_axes`), the form t2n chooses for it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

Case = tuple[nn.Module, tuple[torch.Tensor, ...]]


def parse(cell: str) -> tuple[str, dict[str, str]]:
    """``"family k=v k=v"`` → (family, {k: v})."""
    family, *pairs = cell.split()
    return family, dict(p.split("=", 1) for p in pairs)


def _gen() -> torch.Generator:
    return torch.Generator().manual_seed(0)


def _conv(dims: int, c: int) -> nn.Module:
    return {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}[dims](c, c, 3, padding=1)


class Pre(nn.Module):
    """``conv`` (or nothing), then ``body``."""

    def __init__(self, conv: nn.Module | None, body: nn.Module) -> None:
        super().__init__()
        self.conv = conv if conv is not None else nn.Identity()
        self.body = body

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.body(self.conv(args[0]), *args[1:])
        return out


class Interpolate(nn.Module):
    """``F.interpolate`` by factor ``f`` on every spatial axis: spelled as ``scale_factor``
    (``spell=scale``) or as the output ``size`` it gives (``spell=size``)."""

    def __init__(self, mode: str, f: float, spell: str, align: bool | None) -> None:
        super().__init__()
        self.mode, self.f, self.spell, self.align = mode, f, spell, align

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.spell == "size":
            size = [int(math.floor(d * self.f)) for d in x.shape[2:]]
            return F.interpolate(x, size=size, mode=self.mode, align_corners=self.align)
        return F.interpolate(x, scale_factor=self.f, mode=self.mode, align_corners=self.align)


_LINEAR = {1: "linear", 2: "bilinear", 3: "trilinear"}


def upsample(p: dict[str, str]) -> Case:
    dims, c, s, n = int(p["dims"]), int(p["c"]), int(p["s"]), int(p["n"])
    mode = p["mode"]
    torch_mode = _LINEAR[dims] if mode == "linear" else "bicubic" if mode == "cubic" else mode
    align = None if mode.startswith("nearest") else p.get("align", "0") == "1"
    body = Interpolate(torch_mode, float(p["f"]), p.get("spell", "scale"), align)
    conv = _conv(dims, c) if p.get("conv") == "1" else None
    return Pre(conv, body), (torch.randn(n, c, *[s] * dims, generator=_gen()),)


class Pool(nn.Module):
    def __init__(self, kind: str, dims: int, k: int, out: int) -> None:
        super().__init__()
        self.kind, self.dims, self.k, self.out = kind, dims, k, out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = self.dims
        if self.kind == "max":
            return getattr(F, f"max_pool{d}d")(x, self.k, self.k)
        if self.kind == "max3s1":
            return getattr(F, f"max_pool{d}d")(x, 3, 1, 1)
        if self.kind == "avg":
            return getattr(F, f"avg_pool{d}d")(x, self.k, self.k)
        if self.kind == "avg3s1":
            return getattr(F, f"avg_pool{d}d")(x, 3, 1, 1, count_include_pad=False)
        if self.kind == "adaptive_avg":
            return getattr(F, f"adaptive_avg_pool{d}d")(x, self.out)
        if self.kind == "adaptive_max":
            return getattr(F, f"adaptive_max_pool{d}d")(x, self.out)
        raise ValueError(self.kind)


def pool(p: dict[str, str]) -> Case:
    """``kind``: max / avg (window and stride ``k``), max3s1 / avg3s1 (3 wide, stride 1,
    padding 1), adaptive_avg / adaptive_max to ``out`` cells per axis (``out=1``: global)."""
    dims, c, s, n = int(p["dims"]), int(p["c"]), int(p["s"]), int(p["n"])
    body = Pool(p["kind"], dims, int(p.get("k", "2")), int(p.get("out", "1")))
    conv = _conv(dims, c) if p.get("conv") == "1" else None
    return Pre(conv, body), (torch.randn(n, c, *[s] * dims, generator=_gen()),)


class CumSum(nn.Module):
    def __init__(self, axis: int) -> None:
        super().__init__()
        self.axis = axis

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, dim=self.axis)


def cumsum(p: dict[str, str]) -> Case:
    """``[n, c, s]``, summed along ``axis`` (2: the length ``s``; 1: the ``c`` axis)."""
    c, s, n = int(p["c"]), int(p["s"]), int(p["n"])
    conv = _conv(1, c) if p.get("conv") == "1" else None
    return Pre(conv, CumSum(int(p.get("axis", "2")))), (torch.randn(n, c, s, generator=_gen()),)


class FirstOutput(nn.Module):
    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.inner(x)[0]
        return out


def rnn(p: dict[str, str]) -> Case:
    """``cell`` lstm / gru / rnn of ``c`` hidden units (input size ``c``) over ``s``
    steps, batch ``n`` (batch first), ``layers`` layers, ``bidir`` 0/1."""
    c, s, n = int(p["c"]), int(p["s"]), int(p["n"])
    layer = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}[p["cell"]]
    inner = layer(c, c, num_layers=int(p.get("layers", "1")), bidirectional=p.get("bidir") == "1",
                  batch_first=True)
    return FirstOutput(inner), (torch.randn(n, s, c, generator=_gen()),)


class Attention(nn.Module):
    """SDPA of ``[n, h, s, d]`` queries, keys and values; ``mask``: none, causal
    (``is_causal``), bool (causal and padded keys, built from a bool ``[n, s]`` input),
    float (the same mask as 0 / -inf, an ``[n, 1, s, s]`` input), pad (padded keys only,
    bool ``[n, 1, 1, s]``)."""

    def __init__(self, mask: str) -> None:
        super().__init__()
        self.mask = mask

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *rest: torch.Tensor) -> torch.Tensor:
        if self.mask == "none":
            return F.scaled_dot_product_attention(q, k, v)
        if self.mask == "causal":
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        mask = rest[0]
        if self.mask == "pad":
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None, None, :])
        if self.mask == "float":
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        causal = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
        return F.scaled_dot_product_attention(q, k, v, attn_mask=causal & mask[:, None, None, :])


def attention(p: dict[str, str]) -> Case:
    """``c`` = heads x 64 (head size 64, ``c`` 64 or more) over ``s`` positions."""
    c, s, n = int(p["c"]), int(p["s"]), int(p["n"])
    heads = max(1, c // 64)
    g = _gen()
    qkv = tuple(torch.randn(n, heads, s, 64, generator=g) for _ in range(3))
    mask = p["mask"]
    if mask in ("none", "causal"):
        return Attention(mask), qkv
    keep = torch.ones(n, s, dtype=torch.bool)
    keep[:, s - max(1, s // 4):] = False
    if mask == "float":  # the bool mask's causal and padding parts as 0 / -inf, given as an input
        both = torch.ones(s, s, dtype=torch.bool).tril() & keep[:, None, None, :]
        return Attention(mask), (*qkv, torch.zeros(n, 1, s, s).masked_fill(~both, float("-inf")))
    return Attention(mask), (*qkv, keep)


class Norm(nn.Module):
    def __init__(self, kind: str, c: int, dims: int) -> None:
        super().__init__()
        self.kind = kind
        if kind == "layer":
            self.norm: nn.Module = nn.LayerNorm(c)
        elif kind == "rms":
            self.norm = nn.RMSNorm(c)
        elif kind == "group":
            self.norm = nn.GroupNorm(max(1, c // 8), c)
        elif kind == "instance":
            self.norm = {1: nn.InstanceNorm1d, 2: nn.InstanceNorm2d, 3: nn.InstanceNorm3d}[dims](c, affine=True)
        else:
            self.norm = {1: nn.BatchNorm1d, 2: nn.BatchNorm2d, 3: nn.BatchNorm3d}[dims](c)
        for prm in self.norm.parameters():
            nn.init.uniform_(prm, 0.5, 1.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kind in ("layer", "rms"):  # over channels: tokens of a feature map
            out: torch.Tensor = self.norm(x.movedim(1, -1)).movedim(-1, 1)
            return out
        out = self.norm(x)
        return out


def norm(p: dict[str, str]) -> Case:
    """``kind`` layer / rms (over the channels of each position), group (``c / 8``
    groups), instance, batch (running statistics, as at inference) of ``[n, c, s...]``."""
    dims, c, s, n = int(p.get("dims", "2")), int(p["c"]), int(p["s"]), int(p["n"])
    module = Norm(p["kind"], c, dims)
    if p["kind"] == "batch":
        module.norm.running_mean.uniform_(-1, 1)  # type: ignore[union-attr, operator]
        module.norm.running_var.uniform_(0.5, 2)  # type: ignore[union-attr, operator]
    conv = _conv(dims, c) if p.get("conv") == "1" else None
    return Pre(conv, module), (torch.randn(n, c, *[s] * dims, generator=_gen()),)


class Decoder(nn.Module):
    """conv → bilinear x2 → conv → nearest x2."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.a, self.b = nn.Conv2d(c, c, 3, padding=1), nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.interpolate(self.a(x), scale_factor=2, mode="bilinear", align_corners=False)
        return F.interpolate(self.b(x), scale_factor=2, mode="nearest")


class Sequencer(nn.Module):
    """A Sequencer2D block: bidirectional LSTMs over the rows and over the columns of a
    ``[n, c, s, s]`` feature map, concatenated and projected back to ``c`` channels."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.rows = nn.LSTM(c, c // 2, bidirectional=True, batch_first=True)
        self.cols = nn.LSTM(c, c // 2, bidirectional=True, batch_first=True)
        self.proj = nn.Linear(2 * c, c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, c, h, w = x.shape
        t = x.permute(0, 2, 3, 1)  # n, h, w, c
        rows = self.rows(t.reshape(n * h, w, c))[0].reshape(n, h, w, c)
        cols = self.cols(t.permute(0, 2, 1, 3).reshape(n * w, h, c))[0].reshape(n, w, h, c).permute(0, 2, 1, 3)
        return self.proj(torch.cat([rows, cols], dim=-1)).permute(0, 3, 1, 2)


def block(p: dict[str, str]) -> Case:
    """``kind`` decoder (:class:`Decoder`) or sequencer (:class:`Sequencer`)."""
    c, s, n = int(p["c"]), int(p["s"]), int(p["n"])
    module = Decoder(c) if p["kind"] == "decoder" else Sequencer(c)
    return module, (torch.randn(n, c, s, s, generator=_gen()),)


class TiedHead(nn.Module):
    """A language model's two ends: token embedding, a mixing step, and the output
    projection whose weight is the embedding matrix (``tie_word_embeddings``)."""

    def __init__(self, vocab: int, width: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.head(torch.tanh(self.embed(ids)))
        return out


def head(p: dict[str, str]) -> Case:
    """``v`` vocabulary rows of width ``c``, ``s`` tokens of a batch of ``n``."""
    v, c, s, n = int(p["v"]), int(p["c"]), int(p["s"]), int(p["n"])
    return TiedHead(v, c), (torch.randint(0, v, (n, s), generator=_gen()),)


class Sort(nn.Module):
    """``op`` along the last axis: ``sort`` (values and indices, added so that both are
    made and the cell has one output) or ``argsort``; ``desc``: descending."""

    def __init__(self, op: str, desc: bool) -> None:
        super().__init__()
        self.op, self.desc = op, desc

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.op == "argsort":
            return torch.argsort(x, dim=-1, descending=self.desc)
        values, indices = torch.sort(x, dim=-1, descending=self.desc)
        return values + indices.to(values.dtype)


class Router(nn.Module):
    """A mixture-of-experts router's dispatch order: each token's top 2 of 8 experts, then
    the (token, expert) pairs sorted by expert, stably (an expert's tokens in order), as
    ``torch.sort(expert_ids.flatten(), stable=True)``; the permutation is the output."""

    def forward(self, logits: torch.Tensor) -> torch.Tensor:
        experts = torch.topk(logits, 2, dim=-1).indices
        return torch.sort(experts.flatten(), stable=True).indices


def sort(p: dict[str, str]) -> Case:
    """``op`` sort / argsort (:class:`Sort`) of ``[n, s]`` along ``s``, or router
    (:class:`Router`: the router logits of ``s / 2`` tokens, ``s`` pairs sorted);
    ``dynamic=1``: the sorted axis (the router's tokens) is exported as a symbol
    (:func:`dynamic_axes`)."""
    s, n = int(p["s"]), int(p.get("n", "1"))
    if p["op"] == "router":
        return Router(), (torch.randn(s // 2, 8, generator=_gen()),)
    return Sort(p["op"], p.get("desc") == "1"), (torch.randn(n, s, generator=_gen()),)


def dynamic_axes(cell: str) -> dict[str, dict[int, str]]:
    """The input axes ``cell`` exports as symbols, by input name (``input_0``: t2n's name
    of the first input, given to torch.onnx too): ``dynamic=1`` makes the sorted axis (the
    router's tokens) the symbol ``S``; every other cell is static."""
    _, p = parse(cell)
    if p.get("dynamic") != "1":
        return {}
    return {"input_0": {0 if p["op"] == "router" else 1: "S"}}


FAMILIES: dict[str, Callable[[dict[str, str]], Case]] = {
    "upsample": upsample, "pool": pool, "cumsum": cumsum, "rnn": rnn, "attention": attention,
    "norm": norm, "block": block, "head": head, "sort": sort,
}


def build(cell: str) -> Case:
    """The model and inputs of ``cell``, with the weights of ``torch.manual_seed(0)``."""
    family, params = parse(cell)
    torch.manual_seed(0)
    model, args = FAMILIES[family](params)
    return model.eval(), args
