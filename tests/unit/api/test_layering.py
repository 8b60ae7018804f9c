"""Layering: no module above the tensor core reads a Tensor's private fields or builds tensors,
nodes or backward passes by hand; it uses the core's internal API (``ember/_core/internal.py``)
and ``ember.autodiff.backward``.

The core is ``ember/_core/``, ``ember/autodiff/`` and ``ember/checkpoint/``. The check reads each
module's syntax tree, so comments and docstrings may name the fields.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import ember as em
from ember._core.tensor import Tensor

PACKAGE = Path(em.__file__).resolve().parent
CORE = ("_core", "autodiff", "checkpoint")
# the Tensor slots; above the core they are spelled t._raw, t._hardware, t._ckpt_strategy
PRIVATE_FIELDS = frozenset({"_data", "_dev", "_node", "_strategy"})
ALIASES = {"_raw": "_data", "_hardware": "_dev", "_ckpt_strategy": "_strategy"}
# modules of the core whose names upper layers may not import at all, and those of which they may
# import only some (dispatch: the op entry points, not the tensor and node builders)
CLOSED = frozenset({"ember.autodiff.engine", "ember.autodiff.node", "ember.checkpoint.record"})
DISPATCH = "ember._core.dispatch"
DISPATCH_BUILDERS = frozenset({"wrap", "record"})


def _upper_modules() -> list[Path]:
    files = sorted(PACKAGE.rglob("*.py"))
    return [f for f in files if f.relative_to(PACKAGE).parts[0] not in CORE]


def _module_name(path: Path) -> str:
    parts = ["ember", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def violations(source: str, module: str, is_package: bool = False) -> list[str]:
    """What ``source`` (the module ``module``) does that only the core may do, one line each."""
    out: list[str] = []
    dispatch_names = set()
    for node in ast.walk(ast.parse(source)):
        where = f"{module}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Attribute):
            if node.attr in PRIVATE_FIELDS:
                out.append(f"{where} reads .{node.attr}")
            elif node.attr in ALIASES and isinstance(node.ctx, (ast.Store, ast.Del)):
                out.append(f"{where} writes .{node.attr}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in {"getattr", "setattr", "delattr"} and len(node.args) >= 2:
                name = node.args[1]
                if isinstance(name, ast.Constant) and name.value in PRIVATE_FIELDS | set(ALIASES):
                    out.append(f"{where} {node.func.id}(..., {name.value!r})")
        elif isinstance(node, ast.ImportFrom):
            src = _imported(node, module, is_package)
            for alias in node.names:
                full = f"{src}.{alias.name}"
                if src in CLOSED or full in CLOSED:
                    out.append(f"{where} imports {full}")
                elif src == DISPATCH and (
                    alias.name in DISPATCH_BUILDERS or alias.name.startswith("_")
                ):
                    out.append(f"{where} imports {full}")
                elif full == DISPATCH:
                    dispatch_names.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in CLOSED:
                    out.append(f"{where} imports {alias.name}")
    if dispatch_names:  # ``from .._core import dispatch``: its builders by attribute
        for node in ast.walk(ast.parse(source)):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in dispatch_names
                and (node.attr in DISPATCH_BUILDERS or node.attr.startswith("_"))
            ):
                out.append(f"{module}:{node.lineno} uses dispatch.{node.attr}")
    return out


def test_the_upper_modules_are_found() -> None:
    names = {_module_name(f) for f in _upper_modules()}
    assert {"ember.nn.functional", "ember.distributed.ddp", "ember.optim.adam"} <= names
    assert not any(n.startswith(("ember._core.", "ember.autodiff")) for n in names)


@pytest.mark.parametrize("path", _upper_modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_upper_module_reaches_into_the_core(path: Path) -> None:
    found = violations(path.read_text(), _module_name(path), path.name == "__init__.py")
    assert not found, "use ember/_core/internal.py instead:\n" + "\n".join(found)


def test_the_check_catches_each_kind_of_reach() -> None:
    source = """
from .._core.dispatch import apply, wrap, _record
from .._core import dispatch
from ..autodiff.engine import run_backward
from ember.autodiff import node
import ember.autodiff.engine
x = t._data + t._dev + t._node + t._strategy
t._raw = x
y = getattr(t, "_node")
z = dispatch.wrap(Tensor, x, d)
ok = t._raw, t._hardware, t._ckpt_strategy, dispatch.apply, p._train_strategy
"""
    found = violations(source, "ember.optim.example")
    kinds = sorted(f.split(" ", 1)[1] for f in found)
    assert kinds == sorted(
        [
            "imports ember._core.dispatch.wrap",
            "imports ember._core.dispatch._record",
            "imports ember.autodiff.engine.run_backward",
            "imports ember.autodiff.node",
            "imports ember.autodiff.engine",
            "reads ._strategy",
            "reads ._node",
            "reads ._dev",
            "reads ._data",
            "writes ._raw",
            "getattr(..., '_node')",
            "uses dispatch.wrap",
        ]
    )


def test_relative_imports_resolve_from_the_module() -> None:
    src = "from ..autodiff.engine import run_backward\n"
    assert violations(src, "ember.nn.param") == [
        "ember.nn.param:1 imports ember.autodiff.engine.run_backward"
    ]
    # in a package's __init__, one dot is the package itself
    assert violations("from .engine import x\n", "ember.autodiff", is_package=True) == [
        "ember.autodiff:1 imports ember.autodiff.engine.x"
    ]
    assert violations("from .engine import x\n", "ember.nn.engine") == []


def test_the_aliases_read_the_slots(device: em.Device) -> None:
    t = em.Tensor.ones((2, 3), device=device.autodiff()).require_grad()
    for alias, slot in ALIASES.items():
        assert Tensor.__dict__[alias] is Tensor.__dict__[slot]
        assert getattr(t, alias) is getattr(t, slot)
    assert t._hardware == device and t._hardware.gradient_checkpointing_strategy() is None
    assert t._ckpt_strategy is t.gradient_checkpointing_strategy()
