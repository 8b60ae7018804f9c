"""NumPy kernel of the multi-tensor Adam / AdamW step (``Backend.adam_many``).

The same float operations, in the same order and dtype, as the generic ``adam_many``
(``ember/backend/families/optional.py``), so the results are bit-identical; each parameter's
update writes into a few fresh buffers instead of allocating one array per operation (about
four arrays per parameter instead of twelve). float32 / float64 only, every parameter, gradient
and moment of one dtype (``None`` otherwise: the caller then takes the generic kernel).
"""

from __future__ import annotations

import math

import numpy as np


def adam_many(
    params: list[np.ndarray],
    grads: list[np.ndarray],
    exp_avgs: list[np.ndarray] | None,
    exp_avg_sqs: list[np.ndarray] | None,
    step: int,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
    decoupled: bool,
    donate_moments: bool = False,
) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]] | None:
    """New parameters, first and second moments (each list shaped as ``params``); the inputs are
    left unchanged unless ``donate_moments`` (then the moments are updated in their buffers).
    ``None`` when the dtypes are not one of float32 / float64 throughout."""
    if not _one_float_dtype(params, grads, exp_avgs or [], exp_avg_sqs or []):
        return None
    root_bc2 = math.sqrt(1.0 - beta2**step)
    shift = eps * root_bc2
    rate = lr * root_bc2 / (1.0 - beta1**step)
    new, ms, vs = [], [], []
    for i, (p, g) in enumerate(zip(params, grads)):
        f = p.dtype.type
        if weight_decay and decoupled:
            p = np.multiply(p, f(1.0 - lr * weight_decay), out=np.empty_like(p))
        elif weight_decay:
            wd = np.multiply(p, f(weight_decay), out=np.empty_like(p))
            g = np.add(g, wd, out=wd)
        g2 = np.multiply(g, g, out=np.empty_like(g))  # out=: 0-d results stay arrays
        if exp_avgs is None or exp_avg_sqs is None:
            m = np.multiply(g, f(1.0 - beta1), out=np.empty_like(g))
            g2 *= f(1.0 - beta2)
            v = g2
        else:  # the lerps m + (g - m)(1 - b1), as the generic kernel has them
            m0, v0 = exp_avgs[i], exp_avg_sqs[i]
            m = np.subtract(g, m0, out=np.empty_like(g))
            m *= f(1.0 - beta1)
            np.add(m0, m, out=m0 if donate_moments else m)
            m = m0 if donate_moments else m
            np.subtract(g2, v0, out=g2)
            g2 *= f(1.0 - beta2)
            np.add(v0, g2, out=v0 if donate_moments else g2)
            v = v0 if donate_moments else g2
        r = np.sqrt(v, out=np.empty_like(v))
        r += f(shift)
        np.divide(m, r, out=r)
        r *= f(rate)
        np.subtract(p, r, out=r)
        new.append(r)
        ms.append(m)
        vs.append(v)
    return new, ms, vs


_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _one_float_dtype(*groups: list[np.ndarray]) -> bool:
    arrays = [a for group in groups for a in group]
    dt = arrays[0].dtype if arrays else None
    return dt in _FLOATS and all(isinstance(a, np.ndarray) and a.dtype == dt for a in arrays)
