"""Errors of the common PyTorch-user mistakes point the right way (issue 18)."""

from __future__ import annotations

import numpy as np
import pytest

import ember as em
from ember import nn


def test_backward_after_valid_says_model_train(device: em.Device) -> None:
    model = nn.Linear(3, 2, device=device.autodiff())
    x = em.Tensor.from_data(np.ones((4, 3), np.float32), device=device)
    model.valid()  # e.g. left over from an evaluation
    with pytest.raises(em.AutodiffError, match=r"call model\.train\(\) before the forward") as e:
        model(x).sum().backward()
    assert "valid()" in str(e.value)
    model.train()
    assert model(x).sum().backward() is not None  # the advice works


def test_consumed_graph_in_truncated_bptt_says_detach(device: em.Device) -> None:
    rnn = nn.LSTM(3, 4, device=device.autodiff())
    rng = np.random.default_rng(0)
    chunks = [em.Tensor.from_data(rng.normal(size=(5, 2, 3)).astype(np.float32), device=device)]
    chunks.append(chunks[0] * 0.5)
    _, state = rnn(chunks[0])
    state[0].sum().backward()  # the first chunk's backward consumes its graph
    out, _ = rnn(chunks[1], state)  # the carried state still links to that graph
    with pytest.raises(em.AutodiffError, match=r"carry state\.detach\(\) instead") as e:
        out.sum().backward()
    assert "truncated BPTT" in str(e.value)
    out, _ = rnn(chunks[1], tuple(s.detach() for s in state))
    assert out.sum().backward() is not None  # the advice works


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda x: x[5],
            r"index 5 is out of range for axis 0 .*expected an index in \[-2, 2\)",
        ),
        (lambda x: x[:, -4], r"axis 1 of size 3 .*expected an index in \[-3, 3\)"),
        # unsqueeze's range is one wider than the tensor's rank; the message named the wrong rank
        (lambda x: x.unsqueeze_dim(3), r"for a tensor of rank 2 \(expected -3\.\.2"),
        (lambda x: x.unsqueeze(-4), r"for a tensor of rank 2 \(expected -3\.\.2"),
        (lambda x: x.sum_dim(2), r"for a tensor of rank 2 \(expected -2\.\.1\)"),
    ],
)
def test_range_errors_print_the_allowed_range(call: object, message: str) -> None:
    x = em.Tensor.ones((2, 3))
    with pytest.raises(em.ShapeError, match=message):
        call(x)  # type: ignore[operator]
