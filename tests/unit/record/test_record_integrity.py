"""Record integrity: checksums catch flipped bits, odd paths are refused, temp files are cleaned
and files follow the umask."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import safetensors.numpy

import ember as em
from ember.optim import Adam, GradientsParams, lr
from ember.record import RecordError, RecordWarning, load_pytorch, load_training, save_training
from tests.unit.record.small_net import Net


def _trained() -> tuple[Net, Adam, lr.Exponential]:
    em.seed(0)
    model, optim, sched = Net(), Adam(), lr.Exponential(1e-2, 0.9)
    x = em.Tensor.from_data(np.ones((2, 3), np.float32))
    optim.step(next(sched), model, GradientsParams.from_grads(model(x).sum().backward(), model))
    return model, optim, sched


def _header_end(data: bytes) -> int:
    return 8 + int.from_bytes(data[:8], "little")


def _flips(data: bytes, seed: int, per_region: int) -> list[tuple[str, int, int]]:
    """A seeded sample of (region, byte, bit) single-bit flips of the header and the data."""
    rng = np.random.default_rng(seed)
    end = _header_end(data)
    out = []
    for region, lo, hi in (("header", 0, end), ("data", end, len(data))):
        for i in rng.choice(np.arange(lo, hi), size=per_region, replace=False):
            out.append((region, int(i), int(rng.integers(8))))
    return out


@pytest.mark.parametrize("kind", ["module", "training"])
def test_bit_flips_in_data_and_header_raise_record_error(tmp_path: Path, kind: str) -> None:
    model, optim, sched = _trained()
    path = tmp_path / "r.safetensors"
    if kind == "module":
        model.save(path)
    else:
        save_training(path, model, optim, sched, step=1)
    data = path.read_bytes()
    bad_path = tmp_path / "bad.safetensors"
    silent = []
    for region, i, bit in _flips(data, seed=12, per_region=60):
        bad = bytearray(data)
        bad[i] ^= 1 << bit
        bad_path.write_bytes(bytes(bad))
        try:  # a RecordWarning would be an error too (filterwarnings=error)
            if kind == "module":
                Net().load(bad_path)
            else:
                load_training(bad_path, Net(), Adam(), lr.Exponential(1e-2, 0.9))
        except RecordError:
            continue
        silent.append((region, i, bit))
    assert silent == []


def test_a_damaged_tensor_is_named(tmp_path: Path) -> None:
    model, optim, sched = _trained()
    path = tmp_path / "r.safetensors"
    save_training(path, model, optim, sched, step=1)
    data = bytearray(path.read_bytes())
    header = json.loads(data[8 : _header_end(data)])
    start, _ = header["optim/fc.weight/exp_avg"]["data_offsets"]
    data[_header_end(data) + start + 1] ^= 0x10
    path.write_bytes(bytes(data))
    with pytest.raises(RecordError, match=r"\['optim/fc\.weight/exp_avg'\] .* checksum"):
        load_training(path, Net(), Adam(), lr.Exponential(1e-2, 0.9))


def test_checksum_field_is_the_documented_one(tmp_path: Path) -> None:
    """Recompute the field from its documentation with hashlib alone."""
    model = Net()
    path = tmp_path / "m.safetensors"
    model.save(path)
    data = path.read_bytes()
    header = json.loads(data[8 : _header_end(data)])
    meta = header.pop("__metadata__")
    field = json.loads(meta.pop("checksum"))
    assert field["algorithm"] == "sha256" and meta["version"] == "2"
    text = json.dumps(meta, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert field["metadata"] == hashlib.sha256(text.encode()).hexdigest()
    body = data[_header_end(data) :]
    assert sorted(field["tensors"]) == sorted(header)
    for name, info in header.items():
        lo, hi = info["data_offsets"]
        prefix = f"{name}\0{info['dtype']}\0{json.dumps(info['shape'])}\0".encode()
        assert field["tensors"][name] == hashlib.sha256(prefix + body[lo:hi]).hexdigest(), name


def _write_plain(path: Path, metadata: dict[str, str]) -> Net:
    """A module file without the checksum field (an older ember, or another tool)."""
    model = Net()
    arrays = {k: v.to_numpy() for k, v in model.state_dict().items()}
    path.write_bytes(safetensors.numpy.save(arrays, metadata=metadata))
    return model


def test_files_without_checksum_load_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "old.safetensors"
    ids = json.dumps({n: f"{i + 1:016x}" for i, (n, _) in enumerate(Net().named_parameters())})
    model = _write_plain(path, {"format": "ember.module", "version": "1", "param_ids": ids})
    with pytest.warns(RecordWarning, match="no checksum field") as caught:
        loaded = Net().load(path)
    assert caught[0].filename == __file__  # attributed to the caller's line, not ember's
    want = model.fc.weight.val().to_numpy()
    np.testing.assert_array_equal(loaded.fc.weight.val().to_numpy(), want)
    other = tmp_path / "other.safetensors"
    _write_plain(other, {})
    load_pytorch(other, Net())  # other tools' files: no warning (filterwarnings=error)


def test_a_checked_version_without_checksum_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "v2.safetensors"
    _write_plain(path, {"format": "ember.module", "version": "2"})
    with pytest.raises(RecordError, match=r"version '2'.*has none"):
        Net().load(path)


def test_directory_fifo_and_device_paths_are_refused(tmp_path: Path) -> None:
    with pytest.raises(RecordError, match="is a directory"):
        Net().load(tmp_path)
    if hasattr(os, "mkfifo"):
        fifo = tmp_path / "pipe"
        os.mkfifo(fifo)
        errors: list[BaseException] = []

        def load() -> None:
            try:
                load_training(fifo, Net())
            except BaseException as e:
                errors.append(e)

        t = threading.Thread(target=load, daemon=True)
        t.start()
        t.join(timeout=20)
        assert not t.is_alive(), "reading a FIFO blocked"
        assert len(errors) == 1 and isinstance(errors[0], RecordError)
        assert "FIFO" in str(errors[0])
    if os.path.exists("/dev/zero"):
        with pytest.raises(RecordError, match="is a device"):
            load_pytorch("/dev/zero", Net())


def test_sizes_beyond_or_short_of_the_header_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.safetensors"
    Net().save(path)
    data = path.read_bytes()
    (tmp_path / "long").write_bytes(data + b"\0" * 4096)
    with pytest.raises(RecordError, match="4096 bytes beyond"):
        Net().load(tmp_path / "long")
    (tmp_path / "short").write_bytes(data[:-4])
    with pytest.raises(RecordError, match=r"of the \d+ its header declares"):
        Net().load(tmp_path / "short")
    huge = (2**40).to_bytes(8, "little") + b"{" + data[9:]
    (tmp_path / "huge").write_bytes(huge)
    with pytest.raises(RecordError, match="header claims"):
        Net().load(tmp_path / "huge")


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.mark.skipif(os.name != "posix", reason="temp-file liveness uses POSIX pids")
def test_stale_temp_files_are_cleaned_by_the_next_save(tmp_path: Path) -> None:
    target = tmp_path / "w.safetensors"
    dead = tmp_path / f".w.safetensors.{_dead_pid()}.0123456789abcdef.tmp"
    live = tmp_path / f".w.safetensors.{os.getpid()}.fedcba9876543210.tmp"
    legacy_old = tmp_path / ".w.safetensors.ab_cd123.tmp"
    legacy_new = tmp_path / ".w.safetensors.zz_cd123.tmp"
    unrelated = tmp_path / ".v.safetensors.1.0123456789abcdef.tmp"
    for p in (dead, live, legacy_old, legacy_new, unrelated):
        p.write_bytes(b"partial")
    os.utime(legacy_old, (0, 0))  # a pid-less temp file of an older ember, long abandoned
    Net().save(target)
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted([live.name, legacy_new.name, unrelated.name, target.name])


@pytest.mark.skipif(os.name != "posix", reason="umask is POSIX")
@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002])
def test_written_files_follow_the_umask(tmp_path: Path, mask: int) -> None:
    old = os.umask(mask)
    try:
        model, optim, sched = _trained()
        model.save(tmp_path / "m.safetensors")
        save_training(tmp_path / "t.safetensors", model, optim, sched)
        (tmp_path / "plain.txt").write_text("x")  # what every other run file gets
    finally:
        os.umask(old)
    want = 0o666 & ~mask
    for name in ("m.safetensors", "t.safetensors", "plain.txt"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == want, name
