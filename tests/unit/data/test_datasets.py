"""Datasets: shipped digits, MNIST download paths (served locally / offline / corrupt), text."""

from __future__ import annotations

import gzip
import hashlib
import http.server
import importlib
import io
import threading
import urllib.error
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import ember as em
from ember.data import DownloadError, download, transforms
from ember.data.datasets import (
    CharTokenizer,
    RandomBlocks,
    TextData,
    digits,
    load_digits,
    load_text,
    mnist,
    shakespeare,
)

mnist_module = importlib.import_module("ember.data.datasets.mnist")

FIXTURE = Path(__file__).parents[2] / "fixtures" / "tiny.txt"


def test_digits_shipped_and_split() -> None:
    images, labels = load_digits()
    assert images.shape == (1797, 8, 8) and labels.shape == (1797,)
    assert images.max() == 16 and sorted(set(labels.tolist())) == list(range(10))
    train, test = digits("train"), digits("test")
    assert len(train) + len(test) == 1797
    x, _ = train[0]
    assert x.shape == (1, 8, 8) and x.dtype == np.float32 and 0.0 <= x.min() <= x.max() <= 1.0
    all_x = np.concatenate([train.arrays[0], test.arrays[0]]).reshape(1797, -1)
    assert len({row.tobytes() for row in all_x}) > 1700  # the splits are disjoint rows
    with pytest.raises(em.ShapeError, match="split"):
        digits("valid")


def test_transforms() -> None:
    t = transforms.Compose([transforms.ToFloat(1 / 16), transforms.Normalize(0.5, 0.5)])
    out = t(np.full((2, 8, 8), 16, dtype=np.uint8))
    assert out.dtype == np.float32 and np.allclose(out, 1.0)
    assert transforms.Flatten()(np.zeros((3, 1, 8, 8))).shape == (3, 64)
    assert transforms.AddChannel()(np.zeros((3, 8, 8))).shape == (3, 1, 8, 8)
    x = np.arange(2 * 8 * 8, dtype=np.float32).reshape(2, 8, 8)
    a = transforms.RandomShift(1, seed=0)(x)
    b = transforms.RandomShift(1, seed=0)(x)
    assert a.shape == x.shape and np.array_equal(a, b)
    with pytest.raises(em.ShapeError, match="std"):
        transforms.Normalize(0.0, 0.0)


def _idx(data: np.ndarray) -> bytes:
    header = bytes([0, 0, 8, data.ndim]) + b"".join(d.to_bytes(4, "big") for d in data.shape)
    return gzip.compress(header + data.astype(np.uint8).tobytes())


def _fake_mnist() -> dict[str, bytes]:
    rng = np.random.default_rng(0)
    files = {}
    for prefix, n in (("train", 6), ("t10k", 4)):
        files[f"{prefix}-images-idx3-ubyte.gz"] = _idx(rng.integers(0, 256, (n, 28, 28)))
        files[f"{prefix}-labels-idx1-ubyte.gz"] = _idx(rng.integers(0, 10, (n,)))
    return files


@pytest.fixture
def server() -> Iterator[tuple[str, dict[str, bytes]]]:
    """A local HTTP server serving fake MNIST files."""
    files = _fake_mnist()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = files.get(self.path.rsplit("/", 1)[-1])
            if body is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return None

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/", files
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def _point_mnist_at(
    monkeypatch: pytest.MonkeyPatch, url: str, files: dict[str, bytes], *, corrupt: bool = False
) -> None:
    sums = {k: hashlib.md5(v).hexdigest() for k, v in files.items()}
    if corrupt:
        sums["train-images-idx3-ubyte.gz"] = "0" * 32
    monkeypatch.setitem(mnist_module._SOURCES, "mnist", ((url,), sums))


def test_mnist_downloads_once_and_caches(
    server: tuple[str, dict[str, bytes]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, files = server
    monkeypatch.setenv("EMBER_DATA", str(tmp_path))
    _point_mnist_at(monkeypatch, url, files)
    train = mnist("train")
    assert len(train) == 6 and train[0][0].shape == (1, 28, 28)
    assert (tmp_path / "mnist" / "train-images-idx3-ubyte.gz").exists()
    assert len(mnist("test", root=tmp_path)) == 4

    def offline(url: str) -> io.BytesIO:
        raise urllib.error.URLError("network is unreachable")

    monkeypatch.setattr(download, "open_url", offline)
    assert len(mnist("train")) == 6  # served from the cache, no network needed
    assert len(mnist("test")) == 4


def test_checksum_mismatch_is_clear_and_caches_nothing(
    server: tuple[str, dict[str, bytes]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, files = server
    _point_mnist_at(monkeypatch, url, files, corrupt=True)
    with pytest.raises(DownloadError, match=r"checksum mismatch.*nothing was cached"):
        mnist("train", root=tmp_path)
    assert not list((tmp_path / "mnist").glob("train-images*"))


def test_corrupt_cached_file_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dest = tmp_path / "mnist" / "train-images-idx3-ubyte.gz"
    dest.parent.mkdir(parents=True)
    dest.write_bytes(b"not mnist")
    with pytest.raises(DownloadError, match=r"cached file.*delete it"):
        mnist("train", root=tmp_path)


def test_offline_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def offline(url: str) -> io.BytesIO:
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(download, "open_url", offline)
    with pytest.raises(DownloadError) as info:
        em.data.datasets.fashion_mnist("test", root=tmp_path)
    msg = str(info.value)
    assert "are you offline" in msg and "name resolution" in msg and str(tmp_path) in msg
    with pytest.raises(DownloadError, match="are you offline"):
        shakespeare(tmp_path)


def test_cache_dir_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("EMBER_DATA", str(tmp_path))
    assert em.data.cache_dir() == tmp_path
    monkeypatch.delenv("EMBER_DATA")
    assert em.data.cache_dir() == Path.home() / ".cache" / "ember"


def test_text_tokenizer_and_blocks() -> None:
    text = load_text(FIXTURE)
    data = TextData(text)
    tok = data.tokenizer
    assert tok.decode(tok.encode(text)) == text
    assert CharTokenizer.from_dict(tok.to_dict()).chars == tok.chars
    with pytest.raises(em.ShapeError, match="vocabulary"):
        tok.encode("~")
    blocks = RandomBlocks(data.train, block_size=16, batch_size=4, batches=3, seed=1)
    first = [(x.to_numpy(), y.to_numpy()) for x, y in blocks]
    assert len(first) == 3 and first[0][0].shape == (4, 16)
    for x, y in first:
        assert np.array_equal(x[:, 1:], y[:, :-1])
    again = RandomBlocks(data.train, block_size=16, batch_size=4, batches=3, seed=1)
    assert all(np.array_equal(a[0], b[0].to_numpy()) for a, b in zip(first, again))
    state = blocks.state_dict()
    resumed = RandomBlocks(data.train, block_size=16, batch_size=4, batches=3, seed=5)
    resumed.load_state_dict(state)
    assert np.array_equal(next(iter(resumed))[0].to_numpy(), next(iter(blocks))[0].to_numpy())
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_text(FIXTURE.with_name("missing.txt"))
    with pytest.raises(em.ShapeError, match="block_size"):
        RandomBlocks(data.train[:10], block_size=16, batch_size=4, batches=1)
