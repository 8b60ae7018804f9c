"""Small image classifiers for digits, MNIST and Fashion-MNIST."""

from __future__ import annotations

from .. import nn
from .._core.device import Device
from .._core.tensor import Tensor
from ..nn import functional as F


class MLP(nn.Module):
    """Two hidden layers with ReLU on flattened images.

    Args:
        in_features: Pixels per image (64 for digits, 784 for MNIST).
        hidden: Width of the hidden layers.
        num_classes: Number of classes K.

    Shapes:
        (B, C, H, W) or (B, in_features) -> (B, K) logits.
    """

    def __init__(
        self,
        in_features: int,
        hidden: int = 128,
        num_classes: int = 10,
        *,
        device: Device | None = None,
    ) -> None:
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden, device=device)
        self.fc2 = nn.Linear(hidden, hidden, device=device)
        self.fc3 = nn.Linear(hidden, num_classes, device=device)

    def forward(self, x: Tensor) -> Tensor:
        x = x.reshape((x.shape[0], -1))  # (B, C, H, W) -> (B, C * H * W)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


class CNN(nn.Module):
    """Two 3x3 convolution blocks (conv, ReLU, 2x2 max-pool) and a two-layer head.

    Args:
        image_size: Side H = W of the square input images (8 for digits, 28 for MNIST).
        channels: Channels of the first convolution (the second has twice as many).
        hidden: Width of the hidden linear layer.
        num_classes: Number of classes K.
        dropout: Dropout probability before the last layer.

    Shapes:
        (B, 1, H, W) -> (B, K) logits.
    """

    def __init__(
        self,
        image_size: int = 8,
        channels: int = 16,
        hidden: int = 64,
        num_classes: int = 10,
        dropout: float = 0.0,
        *,
        device: Device | None = None,
    ) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, channels, 3, padding=1, device=device)
        self.conv2 = nn.Conv2d(channels, 2 * channels, 3, padding=1, device=device)
        side = image_size // 2 // 2
        self.fc1 = nn.Linear(2 * channels * side * side, hidden, device=device)
        self.fc2 = nn.Linear(hidden, num_classes, device=device)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)  # (B, 1, H, W) -> (B, C, H/2, W/2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)  # -> (B, 2C, H/4, W/4)
        x = x.reshape((x.shape[0], -1))
        x = F.relu(self.fc1(x))
        return self.fc2(self.dropout(x))
