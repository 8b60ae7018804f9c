"""Fit y = 3x - 2 + noise with ember's runtime autodiff and plain gradient descent."""

import ember as em

em.seed(0)
device = em.Device.cpu().autodiff()
x = em.Tensor.random((256, 1), em.Distribution.uniform(-1.0, 1.0), device=device)
noise = em.Tensor.random((256, 1), em.Distribution.normal(0.0, 0.05), device=device)
y = x * 3.0 - 2.0 + noise

w = em.Tensor.zeros((1, 1), device=device).require_grad()
b = em.Tensor.zeros((1,), device=device).require_grad()
for step in range(201):
    loss = ((x @ w + b - y) ** 2).mean()
    grads = loss.backward()
    # parameters are values: build the next ones from the gradients, then mark them again
    w = (w.inner() - 0.5 * w.grad(grads)).autodiff().require_grad()
    b = (b.inner() - 0.5 * b.grad(grads)).autodiff().require_grad()
    if step % 25 == 0:
        print(f"step {step:3d}  loss {loss.item():.5f}")
print(f"w = {w.item():.3f} (true 3), b = {b.item():.3f} (true -2)")
