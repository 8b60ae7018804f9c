"""The PyTorch backend: ``torch.Tensor`` as raw storage on CPU and CUDA (see ``backend.py``)."""
