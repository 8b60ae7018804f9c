"""The two-layer model the record-integrity and training-validation tests save and load."""

from __future__ import annotations

import ember as em
from ember.nn import Linear, Module

AD = em.Device.cpu().autodiff()


class Net(Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = Linear(3, 4, device=AD)
        self.out = Linear(4, 2, device=AD)

    def forward(self, x: em.Tensor) -> em.Tensor:
        return self.out(self.fc(x))
