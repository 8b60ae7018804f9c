"""L-BFGS, as in ``torch.optim.LBFGS``: several closure evaluations per ``step``."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NoReturn

from .._core.tensor import Tensor
from ..autodiff.gradients import Gradients
from ..errors import DeviceError, DTypeError, ShapeError
from .base import Optimizer, State
from .clipping import GradientClipping
from .grads import GradientsParams
from .lbfgs_search import strong_wolfe

if TYPE_CHECKING:
    from ..nn.module import Module
    from ..nn.param import Param

Closure = Callable[[], tuple[Any, Any]]


class LBFGS(Optimizer):
    """L-BFGS with PyTorch's iteration, history and stopping rules. The step along each
    direction is ``lr`` (the very first one ``min(1, 1 / |g|_1) lr``), or with
    ``line_search_fn="strong_wolfe"`` the one PyTorch's strong-Wolfe line search finds from it.

    ``step(lr, model, closure)`` takes a closure instead of gradients, because one step
    evaluates the model several times (up to ``max_iter`` iterations, ``max_eval`` closure
    calls). The closure re-evaluates the loss at the model's current parameters and returns
    ``(loss, grads)``: the loss (a 0-d tensor or a float) and its gradients, either the
    ``Gradients`` of ``loss.backward()`` or a ``GradientsParams``::

        def closure():
            loss = F.mse_loss(model(x), y)
            return loss, loss.backward()

        model = lbfgs.step(None, model, closure)   # lbfgs.last_loss: the first evaluation's

    All trainable parameters take part, as one flat vector (one device, one dtype); a
    parameter without a gradient counts as a zero gradient. Parameter groups cannot set
    options (as ``torch.optim.LBFGS``). State per parameter: ``step`` (iterations so far),
    ``func_evals``, ``prev_grad``, ``last_step`` and the history pairs ``old_dir.<i>`` /
    ``old_stp.<i>``, so ``state_dict`` / records resume the method exactly.

    Example:
        >>> lbfgs = LBFGS(lr=1.0, max_iter=20, history_size=10)
    """

    def __init__(
        self,
        groups: Iterable[Any] | None = None,
        *,
        lr: float | None = None,
        max_iter: int = 20,
        max_eval: int | None = None,
        tolerance_grad: float = 1e-7,
        tolerance_change: float = 1e-9,
        history_size: int = 100,
        line_search_fn: str | None = None,
        grad_clipping: GradientClipping | None = None,
    ) -> None:
        if groups is not None and isinstance(groups, Iterable) and not isinstance(groups, dict):
            groups = list(groups)
            _one_option_set(groups)
        super().__init__(groups, lr=lr, grad_clipping=grad_clipping)
        op = "LBFGS"
        self.max_iter = _count(op, "max_iter", max_iter)
        self.max_eval = _count(
            op, "max_eval", max_eval if max_eval is not None else max_iter * 5 // 4
        )
        self.tolerance_grad = self._check_range(
            op, "tolerance_grad", tolerance_grad, 0.0, float("inf")
        )
        self.tolerance_change = self._check_range(
            op, "tolerance_change", tolerance_change, 0.0, float("inf")
        )
        self.history_size = _count(op, "history_size", history_size)
        if line_search_fn not in (None, "strong_wolfe"):
            raise ShapeError(
                f"LBFGS: expected line_search_fn None (a fixed step of lr) or 'strong_wolfe', "
                f"got {line_search_fn!r}."
            )
        self.line_search_fn = line_search_fn
        self.last_loss: float | None = None

    def step(  # type: ignore[override]
        self, lr: float | None, module: Module, closure: Closure
    ) -> Module:
        """Up to ``max_iter`` L-BFGS iterations on ``module``; returns the module.

        ``closure()`` -> ``(loss, grads)`` at the current parameters (see the class docstring).
        ``self.last_loss`` is the loss of the first evaluation, as ``torch.optim.LBFGS.step``
        returns it."""
        if isinstance(closure, (GradientsParams, Gradients)) or not callable(closure):
            raise DTypeError(
                f"LBFGS.step: expected a closure returning (loss, grads), got "
                f"{type(closure).__name__}. L-BFGS evaluates the model several times per step: "
                "pass `lambda: (loss := f(), loss.backward())`-style code as a function."
            )
        rate = self._default.rate(None if lr is None else float(lr), self.lr, "LBFGS", -1)
        params = [p for p in module.parameters() if p.is_require_grad()]
        if not params:
            raise ShapeError(
                f"LBFGS.step: expected trainable parameters in {type(module).__name__}, got none."
            )
        run = _Run(self, module, params, closure)
        run.load(self._state)
        self.last_loss = run.iterate(rate)
        run.save(self._state)
        self._shared.difference_update(p.id for p in params)
        return module


class _Run:
    """One ``LBFGS.step``: the flat vectors and the history, read from and written back to the
    per-parameter state."""

    def __init__(self, opt: LBFGS, module: Module, params: list[Param], closure: Closure):
        self.opt, self.module, self.params, self.closure = opt, module, params, closure
        first = params[0].val()
        for p in params[1:]:
            v = p.val()
            if v._hardware is not first._hardware:
                raise DeviceError(
                    f"LBFGS: expected all parameters on one device (one flat vector), got "
                    f"{first.device} and {v.device}. Move the model with model.to_device(...)."
                )
            if v.dtype is not first.dtype:
                raise DTypeError(
                    f"LBFGS: expected all parameters of one dtype, got {first.dtype.name} and "
                    f"{v.dtype.name}."
                )
        self.sizes = [p.numel() for p in params]
        self.n_iter, self.func_evals = 0, 0
        self.prev_grad: Tensor | None = None
        self.last_step: Tensor | None = None
        self.dirs: list[Tensor] = []
        self.stps: list[Tensor] = []
        self.ro: list[float] = []
        self.h_diag: Tensor | float = 1.0

    # ---------------------------------------------------------------- flat <-> per parameter
    def flat(self, parts: list[Tensor]) -> Tensor:
        return (
            Tensor.cat([t.reshape((-1,)) for t in parts])
            if len(parts) > 1
            else parts[0].reshape((-1,))
        )

    def split(self, v: Tensor) -> list[Tensor]:
        out, start = [], 0
        for p, n in zip(self.params, self.sizes):
            out.append(v.narrow(0, start, n).reshape(p.shape))
            start += n
        return out

    def load(self, states: dict[Any, State]) -> None:
        st = [states.get(p.id) or {} for p in self.params]
        self.n_iter = int(st[0].get("step", 0))
        self.func_evals = int(st[0].get("func_evals", 0))
        if self.n_iter == 0:
            return
        dev = self.params[0].val().without_autodiff()._hardware

        def vec(key: str) -> Tensor:
            parts = []
            for s in st:
                t = s.get(key)
                if not isinstance(t, Tensor):
                    return _missing(key)
                parts.append(t.to_device(dev) if t._hardware is not dev else t)
            return self.flat(parts)

        self.prev_grad, self.last_step = vec("prev_grad"), vec("last_step")
        i = 0
        while f"old_dir.{i}" in st[0]:
            y, s = vec(f"old_dir.{i}"), vec(f"old_stp.{i}")
            self.dirs.append(y)
            self.stps.append(s)
            self.ro.append(1.0 / _dot(y, s).item())
            i += 1
        if self.dirs:  # the scale of the last accepted pair, as when it was accepted
            y, s = self.dirs[-1], self.stps[-1]
            self.h_diag = _dot(y, s) / _dot(y, y)

    def save(self, states: dict[Any, State]) -> None:
        fields: dict[str, list[Tensor]] = {}
        if self.prev_grad is not None and self.last_step is not None:
            fields["prev_grad"] = self.split(self.prev_grad)
            fields["last_step"] = self.split(self.last_step)
        for i, (y, s) in enumerate(zip(self.dirs, self.stps)):
            fields[f"old_dir.{i}"] = self.split(y)
            fields[f"old_stp.{i}"] = self.split(s)
        for j, p in enumerate(self.params):
            state: State = {"step": self.n_iter, "func_evals": self.func_evals}
            state.update({k: v[j] for k, v in fields.items()})
            states[p.id] = state

    # ---------------------------------------------------------------- the method
    def evaluate(self) -> tuple[float, Tensor]:
        """Loss and flat gradient at the current parameters (one closure call)."""
        got = self.closure()
        if not isinstance(got, tuple) or len(got) != 2:
            raise DTypeError(
                f"LBFGS.step: expected the closure to return (loss, grads), got "
                f"{type(got).__name__}. Return `loss, loss.backward()`."
            )
        loss, grads = got
        if isinstance(grads, Gradients):
            grads = GradientsParams.from_grads(grads, self.module)
        if not isinstance(grads, GradientsParams):
            raise DTypeError(
                f"LBFGS.step: expected the closure's grads as Gradients or GradientsParams, got "
                f"{type(grads).__name__}."
            )
        if self.opt.grad_clipping is not None:
            grads = self.opt.grad_clipping.apply(grads)
        parts = []
        for p in self.params:
            x = p.val().without_autodiff()
            g = grads.remove(p.id)
            if g is None:
                g = Tensor.zeros(p.shape, dtype=x.dtype, device=x.device)
            elif g._hardware is not x._hardware:
                g = g.to_device(x._hardware)
            parts.append(g)
        value = float(loss.item()) if isinstance(loss, Tensor) else float(loss)
        return value, self.flat(parts)

    def move(self, t: float, d: Tensor) -> None:
        """Parameters ``p + t d``."""
        for p, dp in zip(self.params, self.split(d)):
            p._replace(p.val().without_autodiff() + dp * t)

    def evaluate_at(self, d: Tensor) -> Callable[[float], tuple[float, Tensor]]:
        """``evaluate`` at ``x + t d`` for the line search, the parameters left at ``x``."""
        x = [p.val().without_autodiff() for p in self.params]

        def at(t: float) -> tuple[float, Tensor]:
            self.move(t, d)
            try:
                return self.evaluate()
            finally:
                for p, v in zip(self.params, x):
                    p._replace(v)

        return at

    def direction(self, g: Tensor) -> Tensor:
        """``-H g`` by the two-loop recursion over the history."""
        q = -g
        al: list[Tensor] = []
        for y, s, ro in zip(reversed(self.dirs), reversed(self.stps), reversed(self.ro)):
            a = _dot(s, q) * ro
            al.append(a)
            q = q - y * a
        r = q * self.h_diag
        for y, s, ro, a in zip(self.dirs, self.stps, self.ro, reversed(al)):
            r = r + s * (a - _dot(y, r) * ro)
        return r

    def iterate(self, lr: float) -> float:
        opt = self.opt
        tol_change = opt.tolerance_change
        first_loss, g = self.evaluate()
        loss = first_loss
        evals = 1
        self.func_evals += 1
        if g.abs().max().item() <= opt.tolerance_grad:
            return first_loss
        iters = 0
        while iters < opt.max_iter:
            iters += 1
            self.n_iter += 1
            if self.n_iter == 1:
                d = -g
                self.dirs, self.stps, self.ro, self.h_diag = [], [], [], 1.0
            else:
                assert self.prev_grad is not None and self.last_step is not None
                y, s = g - self.prev_grad, self.last_step
                ys_t = _dot(y, s)
                ys = ys_t.item()
                if ys > 1e-10:  # curvature condition: keep the pair
                    if len(self.dirs) == opt.history_size:
                        del self.dirs[0], self.stps[0], self.ro[0]
                    self.dirs.append(y)
                    self.stps.append(s)
                    self.ro.append(1.0 / ys)
                    self.h_diag = ys_t / _dot(y, y)
                d = self.direction(g)
            self.prev_grad = g
            prev_loss = loss
            t = min(1.0, 1.0 / g.abs().sum().item()) * lr if self.n_iter == 1 else lr
            gtd = _dot(g, d).item()
            if gtd > -tol_change:  # not a descent direction
                self.last_step = d * t
                break
            done = False
            if opt.line_search_fn == "strong_wolfe":
                loss, g, t, ls_evals = strong_wolfe(
                    self.evaluate_at(d), d, t, loss, g, gtd, opt.max_eval - evals
                )
                self.move(t, d)
                done = g.abs().max().item() <= opt.tolerance_grad
            else:
                self.move(t, d)
                ls_evals = 0
                if iters != opt.max_iter:  # a fixed step: the next gradient, unless done
                    loss, g = self.evaluate()
                    ls_evals = 1
                    done = g.abs().max().item() <= opt.tolerance_grad
            evals += ls_evals
            self.func_evals += ls_evals
            self.last_step = d * t
            if iters == opt.max_iter or evals >= opt.max_eval or done:
                break
            if self.last_step.abs().max().item() <= tol_change:
                break
            if abs(loss - prev_loss) < tol_change:
                break
        return first_loss


def _dot(a: Tensor, b: Tensor) -> Tensor:
    return (a * b).sum()


def _missing(key: str) -> NoReturn:
    from ..record.errors import RecordError

    raise RecordError(
        f"LBFGS: expected '{key}' in the state of every parameter, got a state without it. "
        "The optimizer state is damaged or from another optimizer."
    )


def _count(op: str, name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ShapeError(f"{op}: expected {name} to be an int >= 1, got {value!r}.")
    return value


def _one_option_set(groups: list[Any]) -> None:
    """Groups may list parameters but not set options (as ``torch.optim.LBFGS``)."""
    for g in groups:
        if isinstance(g, dict) and set(g) - {"params"}:
            raise ShapeError(
                f"LBFGS: expected one set of options for all parameters, got a group with "
                f"{sorted(set(g) - {'params'})}. Pass them to LBFGS(...) instead."
            )
