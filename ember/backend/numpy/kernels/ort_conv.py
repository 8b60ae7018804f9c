"""ONNX Runtime (MLAS) forms of ``conv.py``'s float32 2-d convolutions (issue 20).

Each function returns its result, or ``None`` where the route is off or the rule declines it;
``conv.py`` then runs ember's own kernel. The rule is static (shapes, dtype, a finite weight):

- a forward conv runs as MLAS's NCHWc conv (``com.microsoft.nchwc`` ReorderInput -> Conv ->
  ReorderOutput, the weight reordered here on each call) when O % B == 0 and C % B == 0, or
  C < 8 with a kernel of 16 taps or more, B the CPU's block size (16 with AVX-512, 8 with AVX2;
  detected numerically); otherwise as a plain ONNX ``Conv``;
- an input gradient at stride 1 as the conv of the output gradient with the flipped weight
  where that runs NCHWc or O <= C, else (and at larger strides) as an ONNX ``ConvTranspose``;
  a transposed conv's forward likewise;
- a weight gradient as the NCHWc conv over swapped batch / channel axes (x^T (C, N, H, W) with
  kernel g^T (O, N, Ho, Wo)), only for output grids of at most 256 positions: MLAS loses to
  ember's columns on larger ones (bench/ort_conv_probe.py).

Nothing imports onnxruntime before the first float32 convolution; without it, or with
``EMBER_CONV=numpy``, every call answers ``None``. Sessions are cached per form and shapes.
"""

from __future__ import annotations

import functools
import importlib
import os
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Protocol

import numpy as np

from .im2col import Pair, _all_finite, _as_forward, _conv_out
from .onnx_proto import Node, model
from .threads import _call_threads, _parallel_split, num_threads

_NCHWC = "com.microsoft.nchwc"
_OPSETS = {"": 17, _NCHWC: 1}
_WGRAD_MAX_GRID = 256  # Ho*Wo: ORT's weight gradient wins at 16x16 and loses 1.5-2x at 32x32
# multiply-adds below which a conv runs on one ORT thread: MLAS's second thread, woken for each
# run, saved little there and stalled runs for up to 2 ms after an idle pause (the LeNet step
# at two threads 11.6 -> 8.5 ms; bench/RESULTS.md)
_THREAD_MACS = 1 << 24
# a ConvTranspose from here is split over the batch on ember's pool, one ORT thread per share:
# ORT's own two threads ran it 0.5-1.4x as fast as one (LeNet's 15 M one half as fast), the
# batch shares 1.1-1.5x faster than one thread
_SPLIT_TRANSPOSE_MACS = 1 << 23
Shape = tuple[int, ...]
Pads = tuple[int, int, int, int]  # ONNX order: top, left, bottom, right


class _Binding(Protocol):
    def bind_cpu_input(self, name: str, array: np.ndarray) -> None: ...
    def bind_output(
        self, name: str, device: str, device_id: int, dtype: type, shape: Shape, address: int
    ) -> None: ...


class _Session(Protocol):
    def run(self, outputs: None, feeds: dict[str, np.ndarray]) -> list[np.ndarray]: ...
    def io_binding(self) -> _Binding: ...
    def run_with_iobinding(self, binding: _Binding) -> None: ...


_UNSET = ModuleType("unset")
_runtime: ModuleType | None = _UNSET
_block = 0  # MLAS's NCHWc block size; 0: the NCHWc forms are off


def _on(*operands: np.ndarray | None, weight: np.ndarray | None = None) -> bool:
    """Whether the route is on and takes these operands (None ones left out): all float32 and
    non-empty, ``weight`` (when given) finite."""
    if os.environ.get("EMBER_CONV") == "numpy":
        return False
    arrays = [a for a in (*operands, weight) if a is not None]
    if any(a.dtype != np.float32 or a.size == 0 for a in arrays):
        return False
    global _runtime
    if _runtime is _UNSET:
        with _loading:  # one thread loads; the others wait and see its result
            if _runtime is _UNSET:
                _runtime = _load()
    return _runtime is not None and (weight is None or _all_finite(weight))


_loading = threading.Lock()


def _load() -> ModuleType | None:
    """onnxruntime, with the NCHWc block size found; None where it is missing or fails."""
    global _block
    _block = 0
    try:
        ort = importlib.import_module("onnxruntime")
        _block = _detect_block(ort)
    except Exception:  # an absent or broken install: ember's kernels
        return None
    return ort


def _detect_block(ort: ModuleType) -> int:
    """The B whose NCHWc filter order reproduces a plain ORT Conv, 0 when none does; a failing
    plain Conv raises (the route is off)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 16, 5, 5), dtype=np.float32)
    w = rng.standard_normal((16, 16, 3, 3), dtype=np.float32)
    want = _create(ort, _plain_conv(x.shape, w.shape, (1, 1), (1, 1, 1, 1), (1, 1), False), 1)
    ref = want.run(None, {"x": x, "w": w})[0]
    for block in (16, 8):
        try:
            graph = _nchwc_conv(x.shape, w.shape, (1, 1), (1, 1, 1, 1), (1, 1), False, block)
            got = _create(ort, graph, 1).run(None, {"x": x, "w": _reorder(w, block)})[0]
        except Exception:  # no NCHWc kernels in this build (ARM)
            continue
        if np.allclose(got, ref, rtol=1e-5, atol=1e-5):
            return block
    return 0


def _create(ort: ModuleType, graph: bytes, threads: int) -> _Session:
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    # the graphs are already in their final form: BASIC builds a session in ~0.4 ms (ALL ~0.5)
    # and runs them as fast
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    # workers spin between a run's nodes (a sleeping one misses its share of short ops) but
    # stop when the run ends: spinning between runs slowed OpenBLAS and ember's pool by 31-176%
    so.add_session_config_entry("session.intra_op.allow_spinning", "1")
    so.add_session_config_entry("session.force_spinning_stop", "1")
    so.log_severity_level = 3
    so.enable_cpu_mem_arena = False  # buffers held only during a run: many cached sessions
    session: _Session = ort.InferenceSession(graph, so, providers=["CPUExecutionProvider"])
    return session


@functools.lru_cache(maxsize=128)
def _session(
    build: Callable[..., bytes], args: tuple[object, ...], threads: int
) -> _Session | None:
    """The session of ``build(*args)``; None where this ORT build rejects it (ember's kernels
    then run for those shapes)."""
    if not isinstance(_runtime, ModuleType) or _runtime is _UNSET:
        return None
    try:
        return _create(_runtime, build(*args), threads)
    except Exception:
        return None


def one_thread(macs: int) -> bool:
    """Whether a run of ``macs`` multiply-adds takes one ORT thread wherever it is called."""
    return macs < _THREAD_MACS


def _threads(macs: int) -> int:
    """ORT's intra-op threads for a run of ``macs`` multiply-adds: ``EMBER_NUM_THREADS``, but one
    below ``_THREAD_MACS`` and inside a share of ember's pool (whose threads hold the cores)."""
    return 1 if one_thread(macs) else _call_threads()


def _run(
    build: Callable[..., bytes],
    args: tuple[object, ...],
    feeds: dict[str, np.ndarray],
    threads: int,
) -> np.ndarray | None:
    """The first output of ``build(*args)``'s session run on ``feeds`` at ``threads`` intra-op
    threads; None where the session cannot be built or run. The output is ORT's own memory,
    which ``tracemalloc`` does not count: the convolution and pooling routes keep it, as
    binding their outputs to NumPy arrays (``_run_into``) cost them 1-6% a run (the NCHWc
    convs' ReorderOutput the most; ResNet's step 0.5-1.4 ms, paired)."""
    session = _session(build, args, threads)
    if session is None:
        return None
    try:
        return session.run(None, {k: np.ascontiguousarray(v) for k, v in feeds.items()})[0]
    except Exception:  # ORT logs why; ember's kernel gives the result
        return None


def _run_into(
    build: Callable[..., bytes],
    args: tuple[object, ...],
    feeds: dict[str, np.ndarray],
    outputs: dict[str, np.ndarray],
    threads: int,
) -> bool:
    """Run ``build(*args)``'s session on float32 ``feeds``, each output written into the array
    ``outputs`` names for it (C-ordered float32, of the output's shape); whether it ran. The
    outputs are NumPy's memory, which ``tracemalloc`` counts (``_run``'s are not: the NumPy
    backend's memory figures for a transformer would miss its products, norms and GELUs); the
    binding costs about 4 µs a run."""
    session = _session(build, args, threads)
    if session is None:
        return False
    try:
        binding = session.io_binding()
        for name, array in feeds.items():
            binding.bind_cpu_input(name, np.ascontiguousarray(array))
        for name, out in outputs.items():
            binding.bind_output(name, "cpu", 0, np.float32, out.shape, out.ctypes.data)
        session.run_with_iobinding(binding)
    except Exception:  # ORT logs why; ember's kernel gives the result
        return False
    return True


def batch_shares(
    run: Callable[[int, int], np.ndarray | None], shape: Shape, work: int
) -> np.ndarray | None:
    """``run(lo, hi)``'s float32 results for one batch share per pool thread, gathered into one
    ``shape`` array (``work``: the total for ``_parallel_split``); None if any share failed."""
    out = np.empty(shape, dtype=np.float32)
    failed: list[bool] = []

    def share(lo: int, hi: int) -> None:
        y = run(lo, hi)
        if y is None:
            failed.append(True)
        else:
            out[lo:hi] = y

    _parallel_split(shape[0], work, share, blas=False)
    return None if failed else out


# ------------------------------------------------------------------------------ graphs
def _fits(c: int, o: int) -> bool:
    """The NCHWc conv's channel rule (ORT's NchwcTransformer) for C in, O out."""
    return _block > 0 and o % _block == 0 and (c < 8 or c % _block == 0)


def _nchwc_wins(c: int, o: int, taps: int) -> bool:
    """Whether a C -> O conv of ``taps`` kernel positions runs NCHWc: where the channels fit,
    except below 8 input channels with a kernel under 4x4, where MLAS's NCHW-input kernel ran
    1-8x slower than a plain Conv at 2 threads (as fast at kernels from 4x4 up, 1.2-1.9x faster
    at 5x5)."""
    return _fits(c, o) and (c >= 8 or taps >= 16)


def _reorder(w: np.ndarray, block: int) -> np.ndarray:
    """(O, C, kh, kw) -> MLAS's NCHWc filter order (OIHWBiBo; OIHWBo below 8 input channels),
    the shape kept."""
    o, c, kh, kw = w.shape
    if c >= 8:  # (O/B, Bo, C/B, Bi, kh, kw) -> (O/B, C/B, kh, kw, Bi, Bo)
        r = w.reshape(o // block, block, c // block, block, kh, kw).transpose(0, 2, 4, 5, 3, 1)
    else:  # (O/B, Bo, C, kh, kw) -> (O/B, C, kh, kw, Bo)
        r = w.reshape(o // block, block, c, kh, kw).transpose(0, 2, 3, 4, 1)
    return np.ascontiguousarray(r).reshape(w.shape)


def _geometry(kernel: Shape, stride: Pair, pads: Pads, dilation: Pair) -> dict[str, list[int]]:
    return {
        "kernel_shape": list(kernel),
        "strides": list(stride),
        "pads": list(pads),
        "dilations": list(dilation),
    }


def _out_shape(xs: Shape, ws: Shape, stride: Pair, pads: Pads, dilation: Pair) -> Shape:
    return (
        xs[0],
        ws[0],
        _conv_out(xs[2] + pads[0] + pads[2], ws[2], stride[0], 0, dilation[0]),
        _conv_out(xs[3] + pads[1] + pads[3], ws[3], stride[1], 0, dilation[1]),
    )


def _plain_conv(
    xs: Shape, ws: Shape, stride: Pair, pads: Pads, dilation: Pair, has_bias: bool
) -> bytes:
    """y = Conv(x, w [, b]), NCHW."""
    inputs = ["x", "w", "b"] if has_bias else ["x", "w"]
    node = Node("Conv", inputs, ["y"], _geometry(ws[2:], stride, pads, dilation))
    ys = _out_shape(xs, ws, stride, pads, dilation)
    feeds = {"x": xs, "w": ws, **({"b": (ws[0],)} if has_bias else {})}
    return model([node], feeds, {"y": ys}, opsets=_OPSETS)


def _nchwc_conv(
    xs: Shape,
    ws: Shape,
    stride: Pair,
    pads: Pads,
    dilation: Pair,
    has_bias: bool,
    block: int,
    swap: Pair | None = None,
) -> bytes:
    """y = Conv(x, w [, b]) through the NCHWc layout, the weight "w" fed in ``_reorder``'s
    order. ``swap`` (rows, cols): x is cut to that many rows and columns and read as x^T
    (C, N, rows, cols), and y written back as y^T (the swapped-axes weight gradient)."""
    nodes, src, inits = [], "x", {}
    cs = xs
    if swap is not None:
        if swap != xs[2:]:
            inits = {"starts": [0, 0], "ends": list(swap), "axes": [2, 3]}
            nodes.append(Node("Slice", ["x", "starts", "ends", "axes"], ["xc"]))
            src = "xc"
        nodes.append(Node("Transpose", [src], ["xt"], {"perm": [1, 0, 2, 3]}))
        src, cs = "xt", (xs[1], xs[0], *swap)
    if cs[1] >= 8:
        nodes.append(Node("ReorderInput", [src], ["xr"], domain=_NCHWC))
        src = "xr"
    inputs = [src, "w", "b"] if has_bias else [src, "w"]
    attrs = _geometry(ws[2:], stride, pads, dilation)
    nodes.append(Node("Conv", inputs, ["yr"], attrs, domain=_NCHWC))
    ys = _out_shape(cs, ws, stride, pads, dilation)
    out = "yo" if swap is not None else "y"
    nodes.append(Node("ReorderOutput", ["yr"], [out], {"channels": ws[0]}, domain=_NCHWC))
    if swap is not None:
        nodes.append(Node("Transpose", ["yo"], ["y"], {"perm": [1, 0, 2, 3]}))
        ys = (ys[1], ys[0], *ys[2:])
    feeds = {"x": xs, "w": ws, **({"b": (ws[0],)} if has_bias else {})}
    return model(nodes, feeds, {"y": ys}, initializers=inits, opsets=_OPSETS)


def _conv_transpose(
    xs: Shape,
    ws: Shape,
    ys: Shape,
    stride: Pair,
    padding: Pair,
    output_padding: Pair,
    dilation: Pair,
    has_bias: bool,
) -> bytes:
    """y = ConvTranspose(x, w [, b]), w (C_in, C_out, kh, kw): the adjoint of Conv(y, w)."""
    attrs = _geometry(ws[2:], stride, (*padding, *padding), dilation)
    attrs["output_padding"] = list(output_padding)
    inputs = ["x", "w", "b"] if has_bias else ["x", "w"]
    feeds = {"x": xs, "w": ws, **({"b": (ws[1],)} if has_bias else {})}
    node = Node("ConvTranspose", inputs, ["y"], attrs)
    return model([node], feeds, {"y": ys}, opsets=_OPSETS)


# ------------------------------------------------------------------------------ forms
def _feeds(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None) -> dict[str, np.ndarray]:
    """The graph inputs; no bias input for None or zeros (a layer without bias passes zeros)."""
    if bias is None or not bias.any():
        return {"x": x, "w": weight}
    return {"x": x, "w": weight, "b": bias}


def _conv(
    x: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray | None,
    stride: Pair,
    pads: Pads,
    dilation: Pair,
) -> np.ndarray | None:
    """Conv(x (N, C, H, W), weight (O, C, kh, kw)) [+ bias (O,)]: NCHWc where it wins, else a
    plain ORT Conv (im2col and MLAS's GEMM: 1.5-2.3x faster than ember's columns)."""
    o, c, kh, kw = weight.shape
    feeds = _feeds(x, weight, bias)
    has_bias = "b" in feeds
    ys = _out_shape(x.shape, weight.shape, stride, pads, dilation)
    threads = _threads(ys[0] * o * ys[2] * ys[3] * c * kh * kw)
    if _nchwc_wins(c, o, kh * kw):
        feeds["w"] = _reorder(weight, _block)
        args = (x.shape, weight.shape, stride, pads, dilation, has_bias, _block)
        return _run(_nchwc_conv, args, feeds, threads)
    plain = (x.shape, weight.shape, stride, pads, dilation, has_bias)
    return _run(_plain_conv, plain, feeds, threads)


def conv2d(
    x: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray | None,
    stride: Pair,
    padding: Pair,
    dilation: Pair,
) -> np.ndarray | None:
    """conv2d's forward (groups 1): x (N, C, H, W), weight (O, C, kh, kw), bias (O,) or None
    -> (N, O, Ho, Wo); also a transposed conv's input gradient, whose weight is
    (C_in, C_out, kh, kw)."""
    if not _on(x, bias, weight=weight):
        return None
    return _conv(x, weight, bias, stride, (*padding, *padding), dilation)


def input_grad(
    grad: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray | None,
    out_shape: Shape,
    stride: Pair,
    padding: Pair,
    dilation: Pair,
) -> np.ndarray | None:
    """conv2d's input gradient (groups 1): grad (N, O, Ho, Wo), weight (O, C, kh, kw) ->
    ``out_shape`` (N, C, H, W), plus bias (C,) when given (a transposed conv's forward).

    At stride 1 the conv of grad with the flipped weight (C, O, kh, kw), its bottom / right
    padding one row or column longer per row of output padding, where it runs NCHWc or has no
    more input channels than output ones (O <= C: its im2col columns are then no larger than
    the ConvTranspose's, which took a third of its time on LeNet's 6 <- 16); otherwise a
    ConvTranspose.
    """
    if not _on(grad, bias, weight=weight):
        return None
    _, _, kh, kw = weight.shape
    extra = (
        out_shape[2] - _transposed_size(grad.shape[2], kh, stride[0], padding[0], dilation[0]),
        out_shape[3] - _transposed_size(grad.shape[3], kw, stride[1], padding[1], dilation[1]),
    )
    top, left = dilation[0] * (kh - 1) - padding[0], dilation[1] * (kw - 1) - padding[1]
    o, c = weight.shape[:2]
    # ORT's ConvTranspose rejects output padding past the stride
    past_stride = extra[0] >= stride[0] or extra[1] >= stride[1]
    if stride == (1, 1) and top >= 0 and left >= 0:
        if _nchwc_wins(o, c, kh * kw) or o <= c or past_stride:
            pads = (top, left, top + extra[0], left + extra[1])
            return _conv(grad, _as_forward(weight, 1), bias, (1, 1), pads, dilation)
    if past_stride:
        return None
    return _transpose(grad, weight, bias, out_shape, stride, padding, extra, dilation)


def _transpose(
    grad: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray | None,
    out_shape: Shape,
    stride: Pair,
    padding: Pair,
    extra: Pair,
    dilation: Pair,
) -> np.ndarray | None:
    """ConvTranspose(grad (N, O, Ho, Wo), weight (O, C, kh, kw)) -> ``out_shape``: from
    ``_SPLIT_TRANSPOSE_MACS`` up in one batch share per pool thread on one ORT thread each (each
    image is computed alone, so the bits do not depend on the split), else as one run."""
    feeds = _feeds(grad, weight, bias)
    has_bias = "b" in feeds
    macs = grad.size * weight[0].size
    n = grad.shape[0]

    def run(lo: int, hi: int, threads: int = 1) -> np.ndarray | None:
        part = {k: v[lo:hi] if k == "x" else v for k, v in feeds.items()}
        gs, xs = (hi - lo, *grad.shape[1:]), (hi - lo, *out_shape[1:])
        args = (gs, weight.shape, xs, stride, padding, extra, dilation, has_bias)
        return _run(_conv_transpose, args, part, threads)

    if macs < _SPLIT_TRANSPOSE_MACS or n < 2 or num_threads() == 1:
        return run(0, n, _threads(macs))  # ORT's threads only for a large single image
    return batch_shares(run, out_shape, macs)


def _transposed_size(size: int, k: int, s: int, p: int, d: int) -> int:
    return (size - 1) * s - 2 * p + d * (k - 1) + 1


def weight_grad(
    grad: np.ndarray,
    x: np.ndarray,
    kernel: Pair,
    stride: Pair,
    padding: Pair,
    dilation: Pair,
) -> np.ndarray | None:
    """conv2d's weight gradient (groups 1): grad (N, O, Ho, Wo), x (N, C, H, W) ->
    (O, C, kh, kw), as the NCHWc conv over swapped axes; None unless N and O are multiples of
    the block and Ho*Wo <= 256, or where the result is not finite (ember's kernel then keeps
    its non-finite semantics).

    dW[o, c, a, b] = sum_{n,i,j} g[n, o, i, j] * xpad[n, c, s*i + d*a, s*j + d*b]
    = Conv(x^T (C, N, H, W), kernel g^T (O, N, Ho, Wo), stride d, dilation s)[c, o, a, b],
    the bottom / right padding chosen so the output is kh x kw (x cut where it is not read).
    """
    n, o, ho, wo = grad.shape
    if ho * wo > _WGRAD_MAX_GRID or not _on(grad, x) or not _fits(n, o) or n % _block:
        return None
    # rows / columns of the padded x that the last window's last tap reaches
    reach = (
        stride[0] * (ho - 1) + dilation[0] * (kernel[0] - 1) + 1,
        stride[1] * (wo - 1) + dilation[1] * (kernel[1] - 1) + 1,
    )
    rows, cols = min(x.shape[2], reach[0] - padding[0]), min(x.shape[3], reach[1] - padding[1])
    if rows <= 0 or cols <= 0:  # only padding is read
        return None
    pads = (padding[0], padding[1], reach[0] - padding[0] - rows, reach[1] - padding[1] - cols)
    gt = _reorder(grad.transpose(1, 0, 2, 3), _block)  # (O, N, Ho, Wo) in the filter order
    args = (x.shape, gt.shape, dilation, pads, stride, False, _block, (rows, cols))
    macs = grad.size * x.shape[1] * kernel[0] * kernel[1]
    gw = _run(_nchwc_conv, args, {"x": x, "w": gt}, _threads(macs))
    return gw if gw is not None and _all_finite(gw) else None
