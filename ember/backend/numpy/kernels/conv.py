"""NumPy kernels of 2-d convolution and transposed convolution, forward and backward.

Each uses the im2col columns of ``im2col.py`` and one matrix product per group. A batch with at
least one image per pool thread is worked through a few images at a time (``conv_chunks.py``):
each chunk's columns are built, multiplied and dropped while in cache; smaller batches build the
whole batch's columns and split the products' columns between the threads.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from . import conv_dense, ort_conv, ort_gemm, wgrad_images, wgrad_rows
from .conv_chunks import Chunks, by_images, chunked, sum_parts
from .im2col import Pair, _all_finite, _as_forward, _Geometry
from .norm import _EXACT, _channel_sum, _rows2
from .threads import _PARALLEL_MIN, _at_once, _parallel_split


def _matmul_nt(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b^T for stacks a (G, M, L), b (G, N, L) with a long shared axis L.

    On MLAS where ``ort_gemm`` takes it (float32). Otherwise OpenBLAS computes it as
    (b @ a^T)^T, the larger operand first, and for very long L summed over chunks of 4096:
    OpenBLAS is several times slower on these (small M, N; large L) shapes otherwise (measured
    on LeNet's weight gradients). The pool's threads each take an equal share of L and keep a
    partial sum.
    """
    product = ort_gemm.matmul_nt(a, b)
    if product is not None:
        return product
    length = a.shape[-1]
    step = 4096 if length > 16384 else max(length, 1)
    partial: dict[int, np.ndarray] = {}

    def run(lo: int, hi: int) -> None:
        acc = None
        for s in range(lo, hi, step):
            e = min(s + step, hi)
            p = b[..., s:e] @ a[..., s:e].transpose(0, 2, 1)
            acc = p if acc is None else np.add(acc, p, out=acc)
        if acc is not None:
            partial[lo] = acc

    _parallel_split(length, (a.shape[1] + b.shape[1]) * a.shape[0] * length, run)
    if not partial:
        return np.zeros((a.shape[0], a.shape[1], b.shape[1]), dtype=np.result_type(a, b))
    return np.ascontiguousarray(sum_parts(partial).transpose(0, 2, 1))


def _matmul_wide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a (G, M, K) @ b (G, K, L) for a wide L, its columns split between the pool's threads.

    With a short K (a first layer's few taps) each thread works through 4096-column chunks,
    which keeps the operand in cache: twice as fast as one product on LeNet's first layer.
    """
    length = b.shape[-1]
    out = np.empty((a.shape[0], a.shape[1], length), dtype=np.result_type(a, b))
    step = 4096 if a.shape[2] <= 64 else max(length, 1)

    def run(lo: int, hi: int) -> None:
        for s in range(lo, hi, step):
            e = min(s + step, hi)
            np.matmul(a, b[..., s:e], out=out[..., s:e])

    _parallel_split(length, out.size * a.shape[2] // 8, run)
    return out


def _weight_rows(weight: np.ndarray, groups: int) -> np.ndarray:
    """(O, Cg, kh, kw) -> (G, O/G, Cg*kh*kw)."""
    return weight.reshape(groups, weight.shape[0] // groups, -1)


def conv2d(
    x: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray,
    stride: Pair,
    padding: Pair,
    dilation: Pair,
    groups: int,
) -> np.ndarray:
    kernel = (weight.shape[2], weight.shape[3])
    if groups == 1 and conv_dense.covers(x.shape, kernel, padding, dilation):
        return conv_dense.conv2d(x, weight, bias)
    if groups == 1:
        y_ort = ort_conv.conv2d(x, weight, bias, stride, padding, dilation)
        if y_ort is not None:
            return y_ort
    geo = _Geometry(x.shape, kernel, stride, padding, dilation)
    rows = _weight_rows(weight, groups)
    work = x.shape[0] * geo.columns * weight[0].size * weight.shape[0]
    if chunked(x.shape[0], work):
        ch = Chunks(x.shape, kernel, stride, padding, dilation, x.dtype.itemsize)
        y = np.empty((x.shape[0], weight.shape[0], *geo.out), dtype=np.result_type(x, weight))

        def run(lo: int, hi: int) -> None:
            for s, e, g in ch.each(lo, hi):
                g.unrows_into(np.matmul(rows, g.im2col(x[s:e], groups)), y[s:e])

        by_images(x.shape[0], work, run)
    else:
        y = geo.unrows(_matmul_wide(rows, geo.im2col(x, groups)))
    if bias.any():  # a layer without bias passes zeros: no pass over y for them
        y += bias.reshape(1, -1, 1, 1)
    return y


def _input_grad_by_conv(
    grad: np.ndarray,
    weight: np.ndarray,
    stride: Pair,
    padding: Pair,
    dilation: Pair,
    groups: int,
) -> np.ndarray | None:
    """conv2d's input gradient as one forward convolution of ``grad`` (stride 1 only), or
    ``None`` where the column scatter is the cheaper (or the only exact) way.

    The forward's one deep product (K = O/G*kh*kw) and its tap copies replace a shallow product
    (K = O/G) whose kh*kw-times-larger result is scattered back with adds. Taken when the output
    has no more channels than the input (the gradient's columns are then no larger) and the
    weight is finite: a non-finite weight would meet the padding's zeros (0 * inf = NaN) where the
    scatter, and PyTorch, give none.
    """
    o, cg, kh, kw = weight.shape
    if stride != (1, 1) or o > cg * groups or not _all_finite(weight):
        return None
    pad = (dilation[0] * (kh - 1) - padding[0], dilation[1] * (kw - 1) - padding[1])
    if pad[0] < 0 or pad[1] < 0:
        return None
    zero = np.zeros(cg * groups, dtype=weight.dtype)
    return conv2d(grad, _as_forward(weight, groups), zero, (1, 1), pad, dilation, groups)


def conv2d_backward(
    grad: np.ndarray,
    x: np.ndarray,
    weight: np.ndarray,
    stride: Pair,
    padding: Pair,
    dilation: Pair,
    groups: int,
    need_input: bool,
    need_weight: bool,
    need_bias: bool = True,
) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]:
    """Gradients of ``conv2d`` for x, weight and bias, each only when asked for."""
    kernel = (weight.shape[2], weight.shape[3])
    if groups == 1 and conv_dense.covers(x.shape, kernel, padding, dilation):
        gx, gw = conv_dense.conv2d_backward(grad, x, weight, need_input, need_weight)
        return gx, gw, _bias_grad(grad, need_bias)
    if groups == 1 and (need_input or need_weight):

        def weight_grad() -> np.ndarray | None:
            if kernel == (1, 1) and padding == (0, 0):
                return _pointwise_weight_grad(grad, x, stride)
            return _weight_grad_forms(grad, x, kernel, stride, padding, dilation)

        gx, gw = _ort_grads(
            lambda: ort_conv.input_grad(grad, weight, None, x.shape, stride, padding, dilation),
            weight_grad,
            need_input,
            need_weight,
            grad.size * weight[0].size,
        )
        if gx is not None or gw is not None:
            rest = (grad, x, weight, stride, padding, dilation, 1)
            gx, gw = _after_ort(gx, gw, need_input, need_weight, _conv2d_backward, rest)
            return gx, gw, _bias_grad(grad, need_bias)
    return _conv2d_backward(
        grad, x, weight, stride, padding, dilation, groups, need_input, need_weight, need_bias
    )


def _pointwise_weight_grad(grad: np.ndarray, x: np.ndarray, stride: Pair) -> np.ndarray:
    """The (O, C, 1, 1) weight gradient of a 1x1 conv without padding: grad (N, O, Ho, Wo) as
    rows (O, N*Ho*Wo) times the x (N, C, H, W) it read (every stride-th row and column) as rows
    (C, N*Ho*Wo), transposed: one product, no columns to build. ResNet's stride-2 projections
    at two threads: 633 / 399 µs through ORT's swapped-axes conv, 237 / 186 µs so (PyTorch
    208 / 152)."""
    _, o, ho, wo = grad.shape
    c = x.shape[1]
    read = x[:, :, : stride[0] * ho : stride[0], : stride[1] * wo : stride[1]]
    xr = np.ascontiguousarray(read.transpose(1, 0, 2, 3)).reshape(1, c, -1)
    gr = np.ascontiguousarray(grad.transpose(1, 0, 2, 3)).reshape(1, o, -1)
    return _matmul_nt(gr, xr).reshape(o, c, 1, 1)


def _weight_grad_forms(
    grad: np.ndarray, x: np.ndarray, kernel: Pair, stride: Pair, padding: Pair, dilation: Pair
) -> np.ndarray | None:
    """conv2d's weight gradient (groups 1) by the first form that takes the shape: one product
    per image for few taps (``wgrad_images``, ember's own), from row-stacked x (``wgrad_rows``)
    or as ORT's swapped-axes conv on MLAS; None where all decline (ember's im2col kernel then
    runs)."""
    for form in (wgrad_images.weight_grad, wgrad_rows.weight_grad, ort_conv.weight_grad):
        gw = form(grad, x, kernel, stride, padding, dilation)
        if gw is not None:
            return gw
    return None


def _ort_grads(
    input_grad: Callable[[], np.ndarray | None],
    weight_grad: Callable[[], np.ndarray | None],
    need_input: bool,
    need_weight: bool,
    macs: int,
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The input and weight gradients of a conv of ``macs`` multiply-adds on ORT (the weight's
    of a pointwise conv as one product), None where not needed or declined. Where both are
    needed and each runs one ORT thread anyway (a conv below ``ort_conv``'s thread threshold),
    they run at once, one pool thread each: LeNet's second conv (15 M) split its input gradient
    over the batch and ran the weight gradient after it, leaving a core idle; each gradient is
    computed alone either way, so the bits are the same."""
    if need_input and need_weight and ort_conv.one_thread(macs):
        return _at_once(input_grad, weight_grad)
    return (input_grad() if need_input else None), (weight_grad() if need_weight else None)


def _after_ort(
    gx: np.ndarray | None,
    gw: np.ndarray | None,
    need_input: bool,
    need_weight: bool,
    ember: Callable[..., tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]],
    args: tuple[object, ...],
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """ORT's input / weight gradients completed by ``ember(*args, need_x, need_w, False)`` for
    the ones ORT declined, run after ORT's: both at once would share the cores three ways."""
    more_x, more_w = need_input and gx is None, need_weight and gw is None
    if more_x or more_w:
        rest = ember(*args, more_x, more_w, False)
        gx, gw = (rest[0] if gx is None else gx), (rest[1] if gw is None else gw)
    return gx, gw


def _bias_grad(grad: np.ndarray, need_bias: bool) -> np.ndarray | None:
    """(N, O, Ho, Wo) -> (O,), or None where the bias needs none (a layer without bias): batch
    norm's per-channel sum of the (N, O * Ho * Wo) rows, 2.4-3.5x faster than NumPy's reduction
    over axes 0, 2, 3 (the CNN's (64, 32, 28, 28) 278 -> 107 µs)."""
    if not need_bias:
        return None
    if grad.dtype not in _EXACT or grad.size == 0:  # float16: NumPy's own sum
        return grad.sum(axis=(0, 2, 3))
    return _channel_sum(_rows2(grad), grad.shape[2] * grad.shape[3])


def _conv2d_backward(
    grad: np.ndarray,
    x: np.ndarray,
    weight: np.ndarray,
    stride: Pair,
    padding: Pair,
    dilation: Pair,
    groups: int,
    need_input: bool,
    need_weight: bool,
    need_bias: bool,
) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]:
    """ember's kernels of ``conv2d_backward``: a few-tap weight gradient per image, the rest
    from im2col columns."""
    kernel = (weight.shape[2], weight.shape[3])
    few = (
        wgrad_images.weight_grad(grad, x, kernel, stride, padding, dilation, groups)
        if need_weight
        else None
    )
    rest = (stride, padding, dilation, groups, need_input, need_weight and few is None, need_bias)
    gx, gw, gb = _conv2d_backward_cols(grad, x, weight, *rest)
    return gx, (gw if few is None else few), gb


def _conv2d_backward_cols(
    grad: np.ndarray,
    x: np.ndarray,
    weight: np.ndarray,
    stride: Pair,
    padding: Pair,
    dilation: Pair,
    groups: int,
    need_input: bool,
    need_weight: bool,
    need_bias: bool,
) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]:
    """``_conv2d_backward`` from im2col columns (or the input gradient as a conv of grad)."""
    kernel = (weight.shape[2], weight.shape[3])
    geo = _Geometry(x.shape, kernel, stride, padding, dilation)
    work = x.shape[0] * geo.columns * weight[0].size * weight.shape[0]
    by_conv = None
    if need_input and grad.dtype == x.dtype == weight.dtype:
        by_conv = _input_grad_by_conv(grad, weight, stride, padding, dilation, groups)
    if by_conv is not None:
        if not need_weight:
            return by_conv, None, _bias_grad(grad, need_bias)
        _, gw, gb = _conv2d_backward(
            grad, x, weight, stride, padding, dilation, groups, False, True, need_bias
        )
        return by_conv, gw, gb
    if chunked(x.shape[0], work) and (need_input or need_weight):
        ch = Chunks(x.shape, kernel, stride, padding, dilation, x.dtype.itemsize)
        gx, gw = _conv2d_backward_chunks(ch, grad, x, weight, groups, need_input, need_weight, work)
        if gw is not None and not _all_finite(gw) and geo.has_junk:
            # a non-finite x in a junk column met g's zero there: the whole-batch way, zeroed
            g = geo.rows(grad, groups)
            gw = _matmul_nt(g, geo.im2col(x, groups, zero_junk=True)).reshape(weight.shape)
        return gx, gw, _bias_grad(grad, need_bias)
    g = geo.rows(grad, groups)  # (G, Og, N*columns)

    def weight_grad() -> np.ndarray:
        # dW = g @ cols^T; the columns are rebuilt from x rather than kept from the forward
        gw = _matmul_nt(g, geo.im2col(x, groups)).reshape(weight.shape)
        if not _all_finite(gw) and geo.has_junk:
            # a non-finite x in a junk column met g's zero there (0 * inf = NaN): again without
            gw = _matmul_nt(g, geo.im2col(x, groups, zero_junk=True)).reshape(weight.shape)
        return gw

    def input_grad() -> np.ndarray:
        dcols = _matmul_wide(_weight_rows(weight, groups).transpose(0, 2, 1), g)
        return geo.col2im(dcols, zero_junk=not _all_finite(weight))

    gx = gw = None
    if need_weight and need_input and g.size * 8 >= _PARALLEL_MIN:
        # the two gradients are independent: one pool thread each, instead of splitting both
        gx, gw = _at_once(input_grad, weight_grad)
    else:
        gw = weight_grad() if need_weight else None
        gx = input_grad() if need_input else None
    return gx, gw, (g.sum(axis=2).reshape(-1) if need_bias else None)


def _conv2d_backward_chunks(
    ch: Chunks,
    grad: np.ndarray,
    x: np.ndarray,
    weight: np.ndarray,
    groups: int,
    need_input: bool,
    need_weight: bool,
    work: int,
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """conv2d's x and weight gradients, chunk by chunk (weight gradient summed per thread)."""
    t_rows = _weight_rows(weight, groups).transpose(0, 2, 1)
    zero_junk = not _all_finite(weight)
    gx = np.empty(x.shape, dtype=np.result_type(grad, weight)) if need_input else None
    parts: dict[int, np.ndarray] = {}

    def run(lo: int, hi: int) -> None:
        acc = None
        for s, e, g in ch.each(lo, hi):
            gr = g.rows(grad[s:e], groups)
            if need_weight:
                p = _matmul_nt(gr, g.im2col(x[s:e], groups))
                acc = p if acc is None else np.add(acc, p, out=acc)
            if gx is not None:
                g.col2im(np.matmul(t_rows, gr), zero_junk=zero_junk, out=gx[s:e])
        if acc is not None:
            parts[lo] = acc

    by_images(x.shape[0], work, run)
    return gx, (sum_parts(parts).reshape(weight.shape) if need_weight else None)


def conv_transpose2d(
    x: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray,
    stride: Pair,
    padding: Pair,
    output_padding: Pair,
    groups: int,
    dilation: Pair,
) -> np.ndarray:
    """The adjoint of conv2d: ``weight`` is (C_in, C_out / groups, kh, kw)."""
    n, _, h, w = x.shape
    _, og, kh, kw = weight.shape
    out_shape = (
        n,
        og * groups,
        (h - 1) * stride[0] - 2 * padding[0] + dilation[0] * (kh - 1) + output_padding[0] + 1,
        (w - 1) * stride[1] - 2 * padding[1] + dilation[1] * (kw - 1) + output_padding[1] + 1,
    )
    # a conv2d from the output back to x has weight (C_in, C_out/G, kh, kw) = (O, Cg, kh, kw):
    # this op is that conv's input gradient
    if groups == 1 and conv_dense.covers_transposed(x.shape, padding, dilation):
        if output_padding == (0, 0):
            return conv_dense.conv_transpose2d(x, weight, bias)
    if groups == 1:
        y_ort = ort_conv.input_grad(x, weight, bias, out_shape, stride, padding, dilation)
        if y_ort is not None:
            return y_ort
    geo = _Geometry(out_shape, (kh, kw), stride, padding, dilation)
    x = _padded_to(x, geo.out)
    t_rows = _weight_rows(weight, groups).transpose(0, 2, 1)
    zero_junk = not _all_finite(weight)
    work = n * geo.columns * weight.size
    if chunked(n, work):
        ch = Chunks(out_shape, (kh, kw), stride, padding, dilation, x.dtype.itemsize)
        y = np.empty(out_shape, dtype=np.result_type(x, weight))

        def run(lo: int, hi: int) -> None:
            for s, e, g in ch.each(lo, hi):
                dcols = np.matmul(t_rows, g.rows(x[s:e], groups))
                g.col2im(dcols, zero_junk=zero_junk, out=y[s:e])

        by_images(n, work, run)
    else:
        y = geo.col2im(_matmul_wide(t_rows, geo.rows(x, groups)), zero_junk=zero_junk)
    if bias.any():
        y += bias.reshape(1, -1, 1, 1)
    return y


def conv_transpose2d_backward(
    grad: np.ndarray,
    x: np.ndarray,
    weight: np.ndarray,
    stride: Pair,
    padding: Pair,
    groups: int,
    dilation: Pair,
    need_input: bool,
    need_weight: bool,
    need_bias: bool = True,
) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]:
    """Gradients of ``conv_transpose2d``, each only when asked for: x's is a conv2d of grad with
    the same weight, the weight's that conv's weight gradient with input grad and output
    gradient x."""
    kernel = (weight.shape[2], weight.shape[3])
    if groups == 1 and conv_dense.covers_transposed(x.shape, padding, dilation):
        if grad.shape[2:] == kernel:  # no output padding
            gx, gw = conv_dense.conv_transpose2d_backward(grad, x, weight, need_input, need_weight)
            return gx, gw, _bias_grad(grad, need_bias)
    if groups == 1 and (need_input or need_weight):

        def input_grad() -> np.ndarray | None:
            gx = ort_conv.conv2d(grad, weight, None, stride, padding, dilation)
            if gx is not None and gx.shape != x.shape:  # output padding past the stride: the
                gx = np.ascontiguousarray(gx[:, :, : x.shape[2], : x.shape[3]])  # rows no x has
            return gx

        gx, gw = _ort_grads(
            input_grad,
            lambda: _weight_grad_forms(x, grad, kernel, stride, padding, dilation),
            need_input,
            need_weight,
            x.size * weight[0].size,
        )
        if gx is not None or gw is not None:
            rest = (grad, x, weight, stride, padding, 1, dilation)
            gx, gw = _after_ort(gx, gw, need_input, need_weight, _conv_transpose2d_backward, rest)
            return gx, gw, _bias_grad(grad, need_bias)
    return _conv_transpose2d_backward(
        grad, x, weight, stride, padding, groups, dilation, need_input, need_weight, need_bias
    )


def _conv_transpose2d_backward(
    grad: np.ndarray,
    x: np.ndarray,
    weight: np.ndarray,
    stride: Pair,
    padding: Pair,
    groups: int,
    dilation: Pair,
    need_input: bool,
    need_weight: bool,
    need_bias: bool,
) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]:
    """ember's kernels of ``conv_transpose2d_backward``: a few-tap weight gradient per image,
    the rest from im2col columns of grad."""
    kernel = (weight.shape[2], weight.shape[3])
    few = (
        wgrad_images.weight_grad(x, grad, kernel, stride, padding, dilation, groups)
        if need_weight
        else None
    )
    rest = (stride, padding, groups, dilation, need_input, need_weight and few is None, need_bias)
    gx, gw, gb = _conv_transpose2d_backward_cols(grad, x, weight, *rest)
    return gx, (gw if few is None else few), gb


def _conv_transpose2d_backward_cols(
    grad: np.ndarray,
    x: np.ndarray,
    weight: np.ndarray,
    stride: Pair,
    padding: Pair,
    groups: int,
    dilation: Pair,
    need_input: bool,
    need_weight: bool,
    need_bias: bool,
) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]:
    """``_conv_transpose2d_backward`` from im2col columns of grad."""
    kernel = (weight.shape[2], weight.shape[3])
    gx = gw = None
    geo = _Geometry(grad.shape, kernel, stride, padding, dilation)
    size = x.shape[2:]
    x = _padded_to(x, geo.out)
    work = grad.shape[0] * geo.columns * weight.size
    if (need_input or need_weight) and chunked(grad.shape[0], work):
        ch = Chunks(grad.shape, kernel, stride, padding, dilation, grad.dtype.itemsize)
        gx, gw = _transpose_backward_chunks(
            ch, grad, x, weight, groups, need_input, need_weight, work
        )
        if gw is not None and not _all_finite(gw) and geo.has_junk:  # as in conv2d_backward
            gw = _matmul_nt(geo.rows(x, groups), geo.im2col(grad, groups, zero_junk=True))
            gw = gw.reshape(weight.shape)
    elif need_input or need_weight:
        cols = geo.im2col(grad, groups)
        if need_input:
            gx = geo.unrows(_matmul_wide(_weight_rows(weight, groups), cols))
        if need_weight:
            xrows = geo.rows(x, groups)
            gw = _matmul_nt(xrows, cols).reshape(weight.shape)
            if not _all_finite(gw) and geo.has_junk:  # as in conv2d_backward
                gw = _matmul_nt(xrows, geo.im2col(grad, groups, zero_junk=True))
                gw = gw.reshape(weight.shape)
    if gx is not None and gx.shape[2:] != size:
        gx = np.ascontiguousarray(gx[:, :, : size[0], : size[1]])
    return gx, gw, _bias_grad(grad, need_bias)


def _padded_to(x: np.ndarray, out: tuple[int, int]) -> np.ndarray:
    """x (N, C, H, W) with zero rows / columns below and right up to ``out``: a transposed
    convolution whose output padding reaches past the stride (allowed below the dilation) has
    an output whose adjoint conv gives more positions than x; they feed nothing."""
    extra = (out[0] - x.shape[2], out[1] - x.shape[3])
    if extra == (0, 0):
        return x
    return np.pad(x, ((0, 0), (0, 0), (0, extra[0]), (0, extra[1])))


def _transpose_backward_chunks(
    ch: Chunks,
    grad: np.ndarray,
    x: np.ndarray,
    weight: np.ndarray,
    groups: int,
    need_input: bool,
    need_weight: bool,
    work: int,
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """conv_transpose2d's x and weight gradients, chunk by chunk."""
    rows = _weight_rows(weight, groups)
    gx = np.empty(x.shape, dtype=np.result_type(grad, weight)) if need_input else None
    parts: dict[int, np.ndarray] = {}

    def run(lo: int, hi: int) -> None:
        acc = None
        for s, e, g in ch.each(lo, hi):
            cols = g.im2col(grad[s:e], groups)
            if gx is not None:
                g.unrows_into(np.matmul(rows, cols), gx[s:e])
            if need_weight:
                p = _matmul_nt(g.rows(x[s:e], groups), cols)
                acc = p if acc is None else np.add(acc, p, out=acc)
        if acc is not None:
            parts[lo] = acc

    by_images(grad.shape[0], work, run)
    return gx, (sum_parts(parts).reshape(weight.shape) if need_weight else None)
