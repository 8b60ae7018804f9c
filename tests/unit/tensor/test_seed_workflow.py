"""The seed workflow of API.md: ones -> require_grad -> powf_scalar(2).sum() -> backward -> grad."""

import numpy as np

import ember as em


def test_seed_workflow(device: em.Device) -> None:
    x = em.Tensor.ones((2, 3), device=device.autodiff()).require_grad()
    grads = x.powf_scalar(2.0).sum().backward()
    g1 = x.grad(grads)
    g2 = x.grad(grads)
    assert g1 is not None and g2 is not None
    np.testing.assert_array_equal(g1.to_numpy(), np.full((2, 3), 2.0, np.float32))
    np.testing.assert_array_equal(g2.to_numpy(), g1.to_numpy())
    assert not g1.is_autodiff()
    removed = x.grad_remove(grads)
    assert removed is not None
    np.testing.assert_array_equal(removed.to_numpy(), g1.to_numpy())
    assert x.grad(grads) is None
    assert len(grads) == 0
