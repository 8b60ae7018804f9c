"""``ember bench``: the workloads come from the repository's ``bench/`` folder, found through
``EMBER_BENCH_DIR`` or beside the package; without it one ``error:`` line says where it looked."""

from __future__ import annotations

import importlib.util
import inspect
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import ember as em
from ember.cli import bench
from ember.cli.main import main

REPO = Path(__file__).resolve().parents[3]
MODULES = sorted({module for module, _ in bench.WORKLOADS.values()})


@pytest.fixture
def isolated(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``sys.path`` and the bench modules of ``sys.modules`` as they were before the test."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    saved = {name: sys.modules.pop(name) for name in MODULES if name in sys.modules}
    monkeypatch.delenv(bench.BENCH_DIR_ENV, raising=False)
    yield
    for name in MODULES:
        sys.modules.pop(name, None)
    sys.modules.update(saved)


def _fake_overhead(folder: Path, tag: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "overhead.py").write_text(
        f"def run(repeats=15):\n    return [{{'bench': {tag!r}, 'repeats': repeats}}]\n"
    )


def test_the_package_holds_no_benchmarks() -> None:
    assert importlib.util.find_spec("ember.bench") is None
    assert not (REPO / "ember" / "bench").exists()


def test_the_checkout_folder_has_every_workload_with_a_fitting_run(isolated: None) -> None:
    assert bench.bench_dir() == REPO / "bench"
    for name, (module, fixed) in bench.WORKLOADS.items():
        params = inspect.signature(bench.load_module(module).run).parameters
        assert set(fixed) | {"repeats"} <= set(params), name
        assert name == "overhead" or "device" in params, name


def test_env_var_names_the_folder(
    isolated: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _fake_overhead(tmp_path, "from-env")
    monkeypatch.setenv(bench.BENCH_DIR_ENV, str(tmp_path))
    assert main(["bench", "overhead", "--repeats", "3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"bench": "from-env", "repeats": 3}]


def test_an_empty_env_folder_is_one_error_line(
    isolated: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(bench.BENCH_DIR_ENV, str(tmp_path))
    assert main(["bench", "mlp"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"ember bench: error: benchmarks not found: {tmp_path}/train_step.py")
    assert f"EMBER_BENCH_DIR={tmp_path}" in err and "pip install -e ." in err


def test_a_wheel_install_without_the_folder_says_where_it_looked(
    isolated: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(bench, "_SOURCE_ROOT", tmp_path)  # site-packages: no bench/ beside ember
    assert main(["bench", "checkpointing", "--repeats", "1"]) == 1
    err = capsys.readouterr().err
    assert f"{tmp_path}/bench/checkpointing_gpt.py does not exist" in err
    assert f"beside the ember package in {tmp_path}" in err and "EMBER_BENCH_DIR" in err


def test_a_module_of_the_same_name_from_elsewhere_is_refused(
    isolated: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_overhead(tmp_path / "a", "a")
    _fake_overhead(tmp_path / "b", "b")
    monkeypatch.setenv(bench.BENCH_DIR_ENV, str(tmp_path / "a"))
    assert bench.run_workload("overhead", None, 1) == [{"bench": "a", "repeats": 1}]
    monkeypatch.setenv(bench.BENCH_DIR_ENV, str(tmp_path / "b"))
    with pytest.raises(em.EmberError, match=r"^benchmark module 'overhead' was imported from"):
        bench.load_module("overhead")


def test_importing_ember_and_its_cli_loads_no_benchmark() -> None:
    code = (
        "import sys, ember, ember.cli.main; "
        f"print(sorted(m for m in {MODULES!r} if m in sys.modules), "
        f"{str(REPO / 'bench')!r} in sys.path)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/"
    ).stdout
    assert out.strip() == "[] False"
