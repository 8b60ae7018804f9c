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
from ember._core.base import TensorBase
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
        assert TensorBase.__dict__[alias] is TensorBase.__dict__[slot]
        assert getattr(Tensor, alias) is getattr(Tensor, slot)
        assert getattr(t, alias) is getattr(t, slot)
    assert t._hardware == device and t._hardware.gradient_checkpointing_strategy() is None
    assert t._ckpt_strategy is t.gradient_checkpointing_strategy()


# ---------------------------------------------------------------- inside the tensor core
CORE_DIR = PACKAGE / "_core"


def _runtime_core_imports(path: Path) -> set[str]:
    """The ``ember._core`` modules ``path`` imports when it runs: top level and inside
    functions, not under ``if TYPE_CHECKING:`` (annotations only)."""
    tree = ast.parse(path.read_text())
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(n) for b in node.body for n in ast.walk(b))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and id(node) not in skipped and node.level == 1:
            if node.module:
                found.add(node.module.split(".")[0])
            else:
                found.update(a.name for a in node.names)
    return {m for m in found if (CORE_DIR / f"{m}.py").exists()}


def test_the_tensor_core_has_no_import_cycle() -> None:
    graph = {p.stem: _runtime_core_imports(p) for p in CORE_DIR.glob("*.py")}
    assert "tensor" in graph and "elementwise" in graph
    for mixin in ("reading", "context", "elementwise", "linalg", "layout", "index", "reduce"):
        assert "tensor" not in graph[mixin], f"_core/{mixin}.py imports tensor.py"
    state: dict[str, int] = {}  # 1: on the path, 2: done

    def visit(m: str, path: list[str]) -> None:
        if state.get(m) == 1:
            raise AssertionError("import cycle in ember/_core: " + " -> ".join(path + [m]))
        if state.get(m) == 2:
            return
        state[m] = 1
        for n in sorted(graph[m]):
            visit(n, path + [m])
        state[m] = 2

    for m in sorted(graph):
        visit(m, [])


def test_the_cycle_check_sees_function_level_imports(tmp_path: Path) -> None:
    src = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .tensor import T\n"
    src += "def f():\n    from .dispatch import apply\n"
    (tmp_path / "m.py").write_text(src)
    assert _runtime_core_imports(tmp_path / "m.py") == {"dispatch"}


def test_tensor_is_its_storage_and_one_mixin_per_family() -> None:
    from ember._core.base import TensorBase

    mixins = [c for c in Tensor.__mro__[1:] if c not in (TensorBase, object)]
    modules = {c.__module__ for c in mixins}
    families = ("reading", "context", "elementwise", "linalg", "layout", "index", "reduce")
    assert {f"ember._core.{f}" for f in families} <= modules
    assert all(m.startswith("ember._core.") for m in modules)
    assert len(mixins) == len(modules)  # one mixin per module
    assert all(c.__dict__.get("__slots__") == () for c in mixins)  # instances stay slotted
    assert not hasattr(em.tensor([1.0]), "__dict__")
