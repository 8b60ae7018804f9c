"""ember's NumPy convolution kernels against PyTorch CPU (oneDNN) and ONNX Runtime (MLAS) on the
convolution shapes of bench/numpy_models.py's ResNet and DCGAN steps (issue 20): forward, input
gradient and weight gradient, each ORT form checked against torch's convolution_backward.

A study of the next lever for those two steps (bench/RESULTS.md, eighth session), not a
benchmark of ember as it is; it needs ``pip install onnxruntime onnx``. One process per thread
count (the variables must be set before import), arms interleaved per repeat:

  EMBER_NUM_THREADS=1 OMP_NUM_THREADS=1 taskset -c 0   python bench/ort_conv_probe.py --threads 1
  EMBER_NUM_THREADS=2 OMP_NUM_THREADS=2 taskset -c 0,1 python bench/ort_conv_probe.py --threads 2 \
      --spinning 0
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

ap = argparse.ArgumentParser()
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--repeats", type=int, default=9)
ap.add_argument("--sample-ms", type=float, default=12.0)
ap.add_argument("--only", default="")
ap.add_argument("--spinning", type=int, default=1)
ap.add_argument("--json", default="")
args = ap.parse_args()
T = args.threads
assert os.environ.get("EMBER_NUM_THREADS") == str(T), "set EMBER_NUM_THREADS"
assert os.environ.get("OMP_NUM_THREADS") == str(T), "set OMP_NUM_THREADS"

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
import torch  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

from ember.backend.numpy.kernels import conv as K  # noqa: E402

torch.set_num_threads(T)
torch.set_num_interop_threads(1)

# ------------------------------------------------------------------------------ shapes
# (name, kind, N, C_in, C_out, H_in, k, s, p, counts(fwd, gx, gw) per training step)
# kind "conv": Conv2d(C_in -> C_out); kind "convT": ConvTranspose2d(C_in -> C_out), H_in its input
SHAPES = [
    ("R1 stem 3->16 k3s1 32", "conv", 32, 3, 16, 32, 3, 1, 1, (1, 0, 1)),
    ("R2 16->16 k3s1 32", "conv", 32, 16, 16, 32, 3, 1, 1, (2, 2, 2)),
    ("R3 16->32 k3s2 32", "conv", 32, 16, 32, 32, 3, 2, 1, (1, 1, 1)),
    ("R4 32->32 k3s1 16", "conv", 32, 32, 32, 16, 3, 1, 1, (1, 1, 1)),
    ("R5 16->32 k1s2 32", "conv", 32, 16, 32, 32, 1, 2, 0, (1, 1, 1)),
    ("R6 32->64 k3s2 16", "conv", 32, 32, 64, 16, 3, 2, 1, (1, 1, 1)),
    ("R7 64->64 k3s1 8", "conv", 32, 64, 64, 8, 3, 1, 1, (1, 1, 1)),
    ("R8 32->64 k1s2 16", "conv", 32, 32, 64, 16, 1, 2, 0, (1, 1, 1)),
    ("D1 1->32 k4s2 32", "conv", 32, 1, 32, 32, 4, 2, 1, (3, 1, 3)),
    ("D2 32->64 k4s2 16", "conv", 32, 32, 64, 16, 4, 2, 1, (3, 3, 3)),
    ("D3 64->128 k4s2 8", "conv", 32, 64, 128, 8, 4, 2, 1, (3, 3, 3)),
    ("D4 128->1 k4s1 4", "conv", 32, 128, 1, 4, 4, 1, 0, (3, 3, 3)),
    ("G1 T64->128 k4s1 1", "convT", 32, 64, 128, 1, 4, 1, 0, (1, 0, 1)),
    ("G2 T128->64 k4s2 4", "convT", 32, 128, 64, 4, 4, 2, 1, (1, 1, 1)),
    ("G3 T64->32 k4s2 8", "convT", 32, 64, 32, 8, 4, 2, 1, (1, 1, 1)),
    ("G4 T32->1 k4s2 16", "convT", 32, 32, 1, 16, 4, 2, 1, (1, 1, 1)),
]
if args.only:
    SHAPES = [s for s in SHAPES if any(s[0].startswith(o) for o in args.only.split(","))]

# ------------------------------------------------------------------------------ ORT graphs
OPSET = 17


def _sess(graph: onnx.GraphProto) -> ort.InferenceSession:
    model = helper.make_model(
        graph,
        opset_imports=[
            helper.make_opsetid("", OPSET),
            helper.make_opsetid("com.microsoft.nchwc", 1),
        ],
    )
    model.ir_version = 8
    so = ort.SessionOptions()
    so.intra_op_num_threads = T
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.add_session_config_entry("session.intra_op.allow_spinning", str(args.spinning))
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def _vi(name: str, shape: tuple[int, ...]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))


def ort_conv(xs, ws, ys, k, s, p, const_w: np.ndarray | None = None) -> ort.InferenceSession:
    """y = Conv(x, w): NCHW, weight (O, C, k, k). const_w: weight baked in as an initializer."""
    node = helper.make_node(
        "Conv", ["x", "w"], ["y"], kernel_shape=[k, k], strides=[s, s], pads=[p, p, p, p]
    )
    inits, inputs = [], [_vi("x", xs)]
    if const_w is None:
        inputs.append(_vi("w", ws))
    else:
        inits.append(helper.make_tensor("w", TensorProto.FLOAT, ws, const_w.ravel().tolist()))
    return _sess(helper.make_graph([node], "conv", inputs, [_vi("y", ys)], initializer=inits))


def ort_convT(gs, ws, xs, k, s, p) -> ort.InferenceSession:
    """x = ConvTranspose(g, w): the adjoint of Conv(x, w) (w (O, C, k, k) read as (Cin, Cout))."""
    hout = s * (gs[2] - 1) + k - 2 * p
    op = xs[2] - hout
    node = helper.make_node(
        "ConvTranspose",
        ["g", "w"],
        ["x"],
        kernel_shape=[k, k],
        strides=[s, s],
        pads=[p, p, p, p],
        output_padding=[op, op],
    )
    return _sess(helper.make_graph([node], "convT", [_vi("g", gs), _vi("w", ws)], [_vi("x", xs)]))


def ort_wgrad(xs, gs, k, s, p) -> ort.InferenceSession:
    """dW (O, C, k, k) of y = conv(x, W) (stride s, pad p) from x (N, C, H, W), g (N, O, Ho, Wo):

    dW[o, c, a, b] = sum_{n,i,j} g[n, o, i, j] * xpad[n, c, s*i + a, s*j + b]
    = Conv(input = x^T (C, N, H, W), weight = g^T (O, N, Ho, Wo), dilation s, stride 1)[c, o, a, b]
    The bottom/right pad is chosen so the output is exactly k x k (x is sliced when too long).
    """
    _n, c, h, _ = xs
    o, ho = gs[1], gs[2]
    extent = s * (ho - 1) + k  # rows of padded x read
    pb = extent - h - p
    nodes = []
    src = "x"
    if pb < 0:
        nodes.append(helper.make_node("Slice", ["x", "st", "en", "ax"], ["xs"]))
        src, hh = "xs", h + pb
        pb = 0
    else:
        hh = h
    nodes += [
        helper.make_node("Transpose", [src], ["xt"], perm=[1, 0, 2, 3]),
        helper.make_node("Transpose", ["g"], ["gt"], perm=[1, 0, 2, 3]),
        helper.make_node(
            "Conv",
            ["xt", "gt"],
            ["wt"],
            kernel_shape=[ho, ho],
            strides=[1, 1],
            dilations=[s, s],
            pads=[p, p, pb, pb],
        ),
        helper.make_node("Transpose", ["wt"], ["dw"], perm=[1, 0, 2, 3]),
    ]
    inits = []
    if src == "xs":
        inits = [
            helper.make_tensor("st", TensorProto.INT64, [2], [0, 0]),
            helper.make_tensor("en", TensorProto.INT64, [2], [hh, hh]),
            helper.make_tensor("ax", TensorProto.INT64, [2], [2, 3]),
        ]
    g = helper.make_graph(
        nodes, "wgrad", [_vi("x", xs), _vi("g", gs)], [_vi("dw", (o, c, k, k))], initializer=inits
    )
    return _sess(g)


B = 16  # MlasNchwcGetBlockSize() with AVX-512F (8 with AVX2 only)


def nchwc_ok(c: int, o: int) -> bool:
    """The NCHWc conv's channel rules (as in ORT's NchwcTransformer)."""
    return o % B == 0 and (c < 8 or c % B == 0)


def reorder_w(w: np.ndarray) -> np.ndarray:
    """OIHW -> MLAS's NCHWc filter order (OIHWBiBo; OIHWBo for < 8 input channels), dims kept."""
    o, c, kh, kw = w.shape
    if c >= 8:
        return np.ascontiguousarray(
            w.reshape(o // B, B, c // B, B, kh, kw).transpose(0, 2, 4, 5, 3, 1)
        ).reshape(w.shape)
    return np.ascontiguousarray(w.reshape(o // B, B, c, kh, kw).transpose(0, 2, 3, 4, 1)).reshape(
        w.shape
    )


def ort_nchwc(
    xs, ys, k, s, p, *, dil=1, pads=None, kernel=None, pre=(), post=(), x_name="x", in_shape=None
):
    """Conv through com.microsoft.nchwc (the layout ORT_ENABLE_ALL uses for constant weights),
    the weight fed each call as an input "wr" already in MLAS's filter order."""
    c = xs[1]
    nodes = list(pre)
    src = nodes[-1].output[0] if nodes else x_name
    if c >= 8:
        nodes.append(helper.make_node("ReorderInput", [src], ["xr"], domain="com.microsoft.nchwc"))
        src = "xr"
    kk = kernel or k
    nodes.append(
        helper.make_node(
            "Conv",
            [src, "wr"],
            ["yr"],
            domain="com.microsoft.nchwc",
            kernel_shape=[kk, kk],
            strides=[s, s],
            dilations=[dil, dil],
            pads=pads or [p] * 4,
        )
    )
    out = ys[0] if post else ys[1]
    nodes.append(
        helper.make_node(
            "ReorderOutput",
            ["yr"],
            ["yo" if post else "y"],
            domain="com.microsoft.nchwc",
            channels=out,
        )
    )
    nodes += list(post)
    inputs = [
        _vi(x_name, in_shape or xs),
        helper.make_tensor_value_info("wr", TensorProto.FLOAT, None),
    ]
    return _sess(helper.make_graph(nodes, "nchwc", inputs, [_vi("y", ys)]))


def ort_nchwc_wgrad(xs, gs, k, s, p):
    """The swapped-axes weight gradient of ort_wgrad through the NCHWc conv (g^T reordered in
    NumPy each call); None where the pads would have to be negative or channels don't fit."""
    n, c, h, _ = xs
    o, ho = gs[1], gs[2]
    pb = s * (ho - 1) + k - h - p
    if pb < 0 or not nchwc_ok(n, o):
        return None
    pre = [helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0, 2, 3])]
    post = [helper.make_node("Transpose", ["yo"], ["y"], perm=[1, 0, 2, 3])]
    return ort_nchwc(
        (c, n, h, h),
        (o, c, k, k),
        k,
        1,
        p,
        dil=s,
        pads=[p, p, pb, pb],
        kernel=ho,
        pre=pre,
        post=post,
        in_shape=xs,
    )


# ------------------------------------------------------------------------------ per-shape ops
def build(shape):
    _name, kind, n, cin, cout, h, k, s, p, _counts = shape
    rng = np.random.default_rng(0)
    if kind == "conv":
        ho = (h + 2 * p - k) // s + 1
        x = rng.standard_normal((n, cin, h, h), dtype=np.float32)
        w = (
            rng.standard_normal((cout, cin, k, k), dtype=np.float32) / np.sqrt(cin * k * k)
        ).astype(np.float32)
        g = rng.standard_normal((n, cout, ho, ho), dtype=np.float32)
    else:
        ho = (h - 1) * s - 2 * p + k
        x = rng.standard_normal((n, cin, h, h), dtype=np.float32)
        w = (
            rng.standard_normal((cin, cout, k, k), dtype=np.float32) / np.sqrt(cin * k * k)
        ).astype(np.float32)
        g = rng.standard_normal((n, cout, ho, ho), dtype=np.float32)
    st, pd, dl = (s, s), (p, p), (1, 1)
    tx, tw, tg = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(g)
    zb = np.zeros(cout, np.float32)

    ops = {}
    if kind == "conv":
        ops["fwd"] = {
            "ember": lambda: K.conv2d(x, w, zb, st, pd, dl, 1),
            "torch": lambda: torch.nn.functional.conv2d(tx, tw, None, s, p),
        }
        ops["gx"] = {
            "ember": lambda: K.conv2d_backward(g, x, w, st, pd, dl, 1, True, False, False)[0],
            "torch": lambda: torch.ops.aten.convolution_backward(
                tg, tx, tw, None, [s, s], [p, p], [1, 1], False, [0, 0], 1, [True, False, False]
            )[0],
        }
        ops["gw"] = {
            "ember": lambda: K.conv2d_backward(g, x, w, st, pd, dl, 1, False, True, False)[1],
            "torch": lambda: torch.ops.aten.convolution_backward(
                tg, tx, tw, None, [s, s], [p, p], [1, 1], False, [0, 0], 1, [False, True, False]
            )[1],
        }
        ops["both"] = {
            "ember": lambda: K.conv2d_backward(g, x, w, st, pd, dl, 1, True, True, False),
            "torch": lambda: torch.ops.aten.convolution_backward(
                tg, tx, tw, None, [s, s], [p, p], [1, 1], False, [0, 0], 1, [True, True, False]
            ),
        }
        sf = ort_conv(x.shape, w.shape, g.shape, k, s, p)
        sfc = ort_conv(x.shape, w.shape, g.shape, k, s, p, const_w=w)
        sx = ort_convT(g.shape, w.shape, x.shape, k, s, p)
        sw = ort_wgrad(x.shape, g.shape, k, s, p)
        ops["fwd"]["ort"] = lambda: sf.run(None, {"x": x, "w": w})[0]
        ops["fwd"]["ortC"] = lambda: sfc.run(None, {"x": x})[0]
        ops["gx"]["ort"] = lambda: sx.run(None, {"g": g, "w": w})[0]
        if s == 1 and k - 1 - p >= 0:  # stride 1: input grad = Conv(g, flipped W^T, pad k-1-p)
            wf = np.ascontiguousarray(w.transpose(1, 0, 2, 3)[:, :, ::-1, ::-1])
            sxc = ort_conv(g.shape, wf.shape, x.shape, k, 1, k - 1 - p)
            ops["gx"]["ortF"] = lambda: sxc.run(None, {"x": g, "w": wf})[0]
        ops["gw"]["ort"] = lambda: sw.run(None, {"x": x, "g": g})[0]
        if nchwc_ok(cin, cout):
            snf = ort_nchwc(x.shape, g.shape, k, s, p)
            ops["fwd"]["ortN"] = lambda: snf.run(None, {"x": x, "wr": reorder_w(w)})[0]
        if s == 1 and k - 1 - p >= 0 and nchwc_ok(cout, cin):
            snx = ort_nchwc(g.shape, x.shape, k, 1, k - 1 - p)
            ops["gx"]["ortN"] = lambda: snx.run(
                None,
                {
                    "x": g,
                    "wr": reorder_w(
                        np.ascontiguousarray(w.transpose(1, 0, 2, 3)[:, :, ::-1, ::-1])
                    ),
                },
            )[0]
        snw = ort_nchwc_wgrad(x.shape, g.shape, k, s, p)
        if snw is not None:
            ops["gw"]["ortN"] = lambda: snw.run(
                None, {"x": x, "wr": reorder_w(np.ascontiguousarray(g.transpose(1, 0, 2, 3)))}
            )[0]
    else:
        # y = convT(x, w) (x: (N, Cin, h, h), y: (N, Cout, H, H)); as conv terms: conv(y -> x) with
        # weight w (O=Cin, C=Cout). convT fwd = conv input-grad; convT gx = conv fwd;
        # convT gw = conv wgrad with input y-grad and output-grad x.
        ops["fwd"] = {
            "ember": lambda: K.conv_transpose2d(x, w, zb, st, pd, (0, 0), 1, dl),
            "torch": lambda: torch.nn.functional.conv_transpose2d(tx, tw, None, s, p),
        }
        ops["gx"] = {
            "ember": lambda: K.conv_transpose2d_backward(
                g, x, w, st, pd, 1, dl, True, False, False
            )[0],
            "torch": lambda: torch.ops.aten.convolution_backward(
                tg, tx, tw, None, [s, s], [p, p], [1, 1], True, [0, 0], 1, [True, False, False]
            )[0],
        }
        ops["gw"] = {
            "ember": lambda: K.conv_transpose2d_backward(
                g, x, w, st, pd, 1, dl, False, True, False
            )[1],
            "torch": lambda: torch.ops.aten.convolution_backward(
                tg, tx, tw, None, [s, s], [p, p], [1, 1], True, [0, 0], 1, [False, True, False]
            )[1],
        }
        ops["both"] = {
            "ember": lambda: K.conv_transpose2d_backward(g, x, w, st, pd, 1, dl, True, True, False),
            "torch": lambda: torch.ops.aten.convolution_backward(
                tg, tx, tw, None, [s, s], [p, p], [1, 1], True, [0, 0], 1, [True, True, False]
            ),
        }
        sf = ort_convT(x.shape, w.shape, g.shape, k, s, p)  # ConvTranspose node
        sx = ort_conv(g.shape, w.shape, x.shape, k, s, p)
        sxc = ort_conv(g.shape, w.shape, x.shape, k, s, p, const_w=w)
        sw = ort_wgrad(g.shape, x.shape, k, s, p)  # conv-wgrad with input g, out-grad x
        ops["fwd"]["ort"] = lambda: sf.run(None, {"g": x, "w": w})[0]
        ops["gx"]["ort"] = lambda: sx.run(None, {"x": g, "w": w})[0]
        ops["gx"]["ortC"] = lambda: sxc.run(None, {"x": g})[0]
        ops["gw"]["ort"] = lambda: sw.run(None, {"x": g, "g": x})[0]
        if nchwc_ok(cout, cin):
            snx = ort_nchwc(g.shape, x.shape, k, s, p)
            ops["gx"]["ortN"] = lambda: snx.run(None, {"x": g, "wr": reorder_w(w)})[0]
        snw = ort_nchwc_wgrad(g.shape, x.shape, k, s, p)
        if snw is not None:
            ops["gw"]["ortN"] = lambda: snw.run(
                None, {"x": g, "wr": reorder_w(np.ascontiguousarray(x.transpose(1, 0, 2, 3)))}
            )[0]
    return ops


def check(ops) -> dict:
    """max |a - ref| / max |ref| against torch, per op and implementation."""
    out = {}
    for op in ("fwd", "gx", "gw"):
        ref = ops[op]["torch"]().numpy()
        for impl, fn in ops[op].items():
            if impl == "torch":
                continue
            r = np.asarray(fn())
            assert r.shape == ref.shape, (op, impl, r.shape, ref.shape)
            out[f"{op}/{impl}"] = float(np.abs(r - ref).max() / max(np.abs(ref).max(), 1e-30))
    return out


def calibrate(fn, sample_ms: float) -> int:
    fn()
    t0 = time.perf_counter()
    fn()
    dt = time.perf_counter() - t0
    return max(1, int(sample_ms / 1e3 / max(dt, 1e-7)))


def timeit_interleaved(impls: dict, repeats: int, sample_ms: float) -> dict:
    """Median ms per call; each repeat runs every implementation once (order rotated), with a
    short pause between implementations so spinning pool threads of the last one go idle."""
    loops = {k: calibrate(f, sample_ms) for k, f in impls.items()}
    names = list(impls)
    for k in names:  # warm-up
        for _ in range(max(1, loops[k] // 2)):
            impls[k]()
    times = {k: [] for k in names}
    for r in range(repeats):
        order = names[r % len(names) :] + names[: r % len(names)]
        for k in order:
            time.sleep(0.01)
            f, n = impls[k], loops[k]
            t0 = time.perf_counter()
            for _ in range(n):
                f()
            times[k].append((time.perf_counter() - t0) / n * 1e3)
    return {
        k: (statistics.median(v), (max(v) - min(v)) / statistics.median(v), min(v))
        for k, v in times.items()
    }


def overhead() -> dict:
    """session.run per-call overhead on a tiny conv (1x1x4x4, 1x1 kernel), NumPy in / out, and
    through IOBinding with OrtValues bound once."""
    x = np.ones((1, 1, 4, 4), np.float32)
    w = np.ones((1, 1, 1, 1), np.float32)
    s = ort_conv(x.shape, w.shape, x.shape, 1, 1, 0)
    feeds = {"x": x, "w": w}
    io = s.io_binding()
    io.bind_cpu_input("x", x)
    io.bind_cpu_input("w", w)
    yv = ort.OrtValue.ortvalue_from_numpy(np.empty((1, 1, 4, 4), np.float32))
    io.bind_ortvalue_output("y", yv)
    xv, wv = ort.OrtValue.ortvalue_from_numpy(x), ort.OrtValue.ortvalue_from_numpy(w)
    ro = ort.RunOptions()
    tx, tw = torch.from_numpy(x), torch.from_numpy(w)
    zb = np.zeros(1, np.float32)
    impls = {
        "ort run(numpy)": lambda: s.run(None, feeds),
        "ort run_with_iobinding": lambda: s.run_with_iobinding(io),
        "ort run_with_ort_values": lambda: s.run_with_ort_values(["y"], {"x": xv, "w": wv}, ro),
        "torch F.conv2d": lambda: torch.nn.functional.conv2d(tx, tw),
        "ember K.conv2d": lambda: K.conv2d(x, w, zb, (1, 1), (0, 0), (1, 1), 1),
    }
    res = {}
    for k, f in impls.items():
        for _ in range(2000):
            f()
        v = []
        for _ in range(7):
            t0 = time.perf_counter()
            for _ in range(5000):
                f()
            v.append((time.perf_counter() - t0) / 5000 * 1e6)
        res[k] = statistics.median(v)
    return res


def main() -> None:
    print(
        f"threads={T} ort={ort.__version__} torch={torch.__version__} numpy={np.__version__} "
        f"affinity={sorted(os.sched_getaffinity(0))} spinning={args.spinning}",
        flush=True,
    )
    results = {"threads": T, "ort": ort.__version__, "shapes": {}, "overhead_us": overhead()}
    print(
        "overhead (us/call):",
        {k: round(v, 1) for k, v in results["overhead_us"].items()},
        flush=True,
    )
    for shape in SHAPES:
        ops = build(shape)
        err = check(ops)
        row = {"counts": shape[-1], "err": err, "t": {}}
        for op, impls in ops.items():
            row["t"][op] = timeit_interleaved(impls, args.repeats, args.sample_ms)
        results["shapes"][shape[0]] = row
        line = " | ".join(
            f"{op}: " + " ".join(f"{k}={v[0]:.3f}({v[1] * 100:.0f}%)" for k, v in d.items())
            for op, d in row["t"].items()
        )
        print(f"{shape[0]:22s} {line}", flush=True)
        print(f"{'':22s} maxrelerr " + " ".join(f"{k}={v:.1e}" for k, v in err.items()), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
