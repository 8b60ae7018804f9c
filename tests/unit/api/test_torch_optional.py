"""PyTorch stays optional: ember imports fast, without torch, and its NumPy path works without it.

Each test runs a fresh interpreter whose meta path hides torch, as on a machine without it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

# "absent": torch cannot be found (find_spec is None), as when it is not installed.
# "broken": torch is found but importing it fails, as with a damaged installation.
HIDE_TORCH = {
    "absent": """
        import sys
        class _Hide:
            def __init__(self, finders):
                self.finders = finders
            def find_spec(self, name, path=None, target=None):
                if name.partition(".")[0] == "torch":
                    return None
                for f in self.finders:
                    spec = f.find_spec(name, path, target) if hasattr(f, "find_spec") else None
                    if spec is not None:
                        return spec
                return None
        sys.meta_path[:] = [_Hide(list(sys.meta_path))]
    """,
    "broken": """
        import sys
        class _Block:
            def find_spec(self, name, path=None, target=None):
                if name.partition(".")[0] == "torch":
                    raise ModuleNotFoundError(f"No module named {name!r}", name=name)
                return None
        sys.meta_path.insert(0, _Block())
    """,
}


def _run(body: str, mode: str = "absent", timeout: float = 120.0) -> str:
    code = textwrap.dedent(HIDE_TORCH[mode]) + textwrap.dedent(body)
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.parametrize("mode", sorted(HIDE_TORCH))
def test_import_is_fast_and_torch_free(mode: str) -> None:
    out = _run(
        """
        import json
        import ember
        heavy = sorted({m.split(".")[0] for m in sys.modules} & {"torch", "scipy", "matplotlib"})
        print(json.dumps({"heavy": heavy}))
        """,
        mode,
    )
    # "fast" is held by what gets imported, not by a wall-clock bound (a loaded CI machine
    # would make a timing assertion flaky): importing ember loads no heavy optional package.
    res = json.loads(out.strip().splitlines()[-1])
    assert res["heavy"] == []


def test_import_does_not_load_torch_even_when_installed() -> None:
    code = "import sys, ember; print('torch' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"


@pytest.mark.parametrize("mode", sorted(HIDE_TORCH))
def test_numpy_training_step_without_torch(mode: str) -> None:
    out = _run(
        """
        import ember as em
        dev = em.Device.cpu().autodiff()
        em.seed(0)
        model = em.nn.Sequential(em.nn.Linear(4, 8, device=dev), em.nn.ReLU(),
                                 em.nn.Linear(8, 3, device=dev))
        x = em.Tensor.random((6, 4), em.Distribution.normal(0.0, 1.0), device=dev)
        y = em.tensor([0, 1, 2, 0, 1, 2], device=dev)
        optim = em.optim.Adam()
        losses = []
        for _ in range(5):
            loss = em.nn.functional.cross_entropy(model(x), y)
            losses.append(loss.item())
            grads = em.optim.GradientsParams.from_grads(loss.backward(), model)
            model = optim.step(1e-2, model, grads)
        import os, tempfile
        import ember.record
        with tempfile.TemporaryDirectory() as d:
            model.save(os.path.join(d, "m.safetensors"))
            model = model.load(os.path.join(d, "m.safetensors"))
            ember.record.save_training(os.path.join(d, "r.safetensors"), model, optim, None, 5)
            assert ember.record.load_training(os.path.join(d, "r.safetensors"), model, optim) == 5
        try:
            em.Device.torch("cpu")
            print("torch device: created")
        except em.DeviceError as e:
            print("torch device:", e)
        print(losses[-1] < losses[0], "torch" in sys.modules)
        """,
        mode,
    )
    lines = out.strip().splitlines()
    assert lines[-1] == "True False"
    assert lines[-2].startswith("torch device: Device.torch:") and "pip install" in lines[-2]


@pytest.mark.parametrize("mode", sorted(HIDE_TORCH))
def test_cli_info_and_help_without_torch(mode: str) -> None:
    out = _run(
        """
        from ember.cli.main import main
        assert main(["info"]) == 0
        try:
            main(["--help"])
        except SystemExit as e:
            assert e.code == 0
        print("torch loaded:", "torch" in sys.modules)
        """,
        mode,
    )
    assert "torch  not installed" in out
    assert "devices: cpu\n" in out
    assert "usage: ember" in out and "info" in out
    assert out.strip().splitlines()[-1] == "torch loaded: False"


def test_python_dash_m_ember_help() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ember", "--help"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    for command in ("train", "info", "bench"):
        assert command in proc.stdout


def test_ember_train_without_torch(tmp_path: object) -> None:
    out = _run(
        f"""
        from ember.cli.main import main
        rc = main(["train", "--model", "mlp", "--epochs", "1", "--display", "none",
                   "--output", {str(tmp_path) + "/run"!r}])
        print("rc", rc, "torch" in sys.modules)
        """
    )
    assert out.strip().splitlines()[-1] == "rc 0 False"
