"""Loading PyTorch weights into ember modules, without running code from the file.

ember's layers use PyTorch's parameter names and layouts (``weight`` as ``[out, in]``,
``running_mean``, ``in_proj_weight``, ``weight_ih_l0`` ...), so most state dicts load as they are;
``key_map`` renames the rest.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import ml_dtypes
import numpy as np

from .._core.tensor import Tensor
from .errors import RecordError
from .io import decode, read_bytes

if TYPE_CHECKING:
    from ..nn.module import Module


def _torch_arrays(path: str | os.PathLike[str], data: bytes) -> dict[str, np.ndarray]:
    try:
        import torch
    except ImportError:
        raise RecordError(
            "load_pytorch: reading a torch.save file needs PyTorch (pip install torch); "
            "alternatively convert it to .safetensors."
        ) from None
    try:
        # weights_only=True: the unpickler accepts tensors and containers only, never code
        obj = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as e:
        raise RecordError(
            f"load_pytorch: {os.fspath(path)!r} is not a readable torch.save file of tensors "
            f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}). It is truncated, "
            "corrupted, or holds objects other than tensors."
        ) from None
    if not isinstance(obj, Mapping):
        raise RecordError(
            f"load_pytorch: expected a state_dict (a mapping of names to tensors), got "
            f"{type(obj).__name__}. Save model.state_dict(), not the model."
        )
    out: dict[str, np.ndarray] = {}
    bad = []
    for k, v in obj.items():
        if not isinstance(v, torch.Tensor):
            bad.append(str(k))
            continue
        t = v.detach().cpu().contiguous()
        if t.dtype == torch.bfloat16:
            out[str(k)] = t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        else:
            out[str(k)] = t.numpy()
    if bad:
        raise RecordError(
            f"load_pytorch: entries {bad} are not tensors. Pass the inner state_dict "
            "(e.g. checkpoint['model']) saved to its own file."
        )
    return out


def read_pytorch(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Name -> NumPy array of a ``torch.save``d state_dict or a safetensors file."""
    data = read_bytes("load_pytorch", path)  # read once, for the format sniff and the decoder
    if data[8:9] == b"{":  # a safetensors header: 8 length bytes, then JSON
        return decode("load_pytorch", path, data, warn_unchecked=False)[0]
    return _torch_arrays(path, data)


def load_pytorch(
    path: str | os.PathLike[str],
    module: Module,
    *,
    key_map: Sequence[tuple[str, str]] = (),
    strict: bool = True,
    cast: bool = False,
) -> Module:
    """Load PyTorch weights into ``module`` (in place) and return it.

    Args:
        path: A ``torch.save(model.state_dict())`` file (read with ``weights_only=True``) or a
            safetensors file.
        module: The ember module; names, shapes and dtypes are checked and every mismatch listed.
        key_map: ``(regex, replacement)`` pairs applied in order to every file key
            (``re.sub``), e.g. ``[(r"^encoder\\.", "")]``.
        strict: Reject missing and unexpected names.
        cast: Convert values to each parameter's dtype instead of rejecting a dtype mismatch.

    Example:
        >>> torch.save(torch_model.state_dict(), "w.pt")
        >>> load_pytorch("w.pt", ember_model)
    """
    arrays = read_pytorch(path)
    mapped: dict[str, Any] = {}
    for key, a in arrays.items():
        new = key
        for pattern, repl in key_map:
            new = re.sub(pattern, repl, new)
        mapped[new] = a
    if cast:
        want = {n: p.dtype for n, p in module.named_parameters()}
        want.update({n: b.dtype for n, b in module.named_buffers()})
        mapped = {
            k: (Tensor.from_data(v).cast(want[k]) if k in want else v) for k, v in mapped.items()
        }
    return module.load_state_dict(mapped, strict=strict)
