"""Containers: Sequential, ModuleList, ModuleDict (children named like PyTorch's)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ...errors import DTypeError
from ..module import Module


class ModuleList(Module):
    """A list of modules whose parameters are tracked (names ``"0"``, ``"1"``, ...)."""

    def __init__(self, modules: Iterable[Module] = ()) -> None:
        super().__init__()
        for m in modules:
            self.append(m)

    def append(self, module: Module) -> ModuleList:
        setattr(self, str(len(self)), module)
        return self

    def __getitem__(self, index: int) -> Module:
        names = self.__dict__["_module_names"]
        return self.__dict__[names[index]]

    def __len__(self) -> int:
        return len(self.__dict__["_module_names"])

    def __iter__(self) -> Iterator[Module]:
        return self.children()

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            "ModuleList.forward: a ModuleList is a container; iterate over it in your forward."
        )


class Sequential(ModuleList):
    """Calls its children in order; children are named ``"0"``, ``"1"``, ...

    Example:
        >>> net = Sequential(Linear(4, 8), ReLU(), Linear(8, 2))
        >>> [n for n, _ in net.named_parameters()]
        ['0.weight', '0.bias', '2.weight', '2.bias']
    """

    def __init__(self, *modules: Module) -> None:
        super().__init__(modules)

    def forward(self, x: Any) -> Any:
        for m in self.children():
            x = m(x)
        return x


class ModuleDict(Module):
    """A dict of modules whose parameters are tracked under their keys."""

    def __init__(self, modules: Mapping[str, Module] | None = None) -> None:
        super().__init__()
        for k, m in (modules or {}).items():
            self[k] = m

    def __setitem__(self, key: str, module: Module) -> None:
        if not isinstance(module, Module):
            raise DTypeError(
                f"ModuleDict: expected a Module for {key!r}, got {type(module).__name__}."
            )
        setattr(self, key, module)

    def __getitem__(self, key: str) -> Module:
        if key not in self.__dict__["_module_names"]:
            raise KeyError(key)
        return self.__dict__[key]

    def __contains__(self, key: object) -> bool:
        return key in self.__dict__["_module_names"]

    def __len__(self) -> int:
        return len(self.__dict__["_module_names"])

    def __iter__(self) -> Iterator[str]:
        return iter(list(self.__dict__["_module_names"]))

    def keys(self) -> list[str]:
        return list(self.__dict__["_module_names"])

    def items(self) -> list[tuple[str, Module]]:
        return list(self.named_children())

    def values(self) -> list[Module]:
        return list(self.children())

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            "ModuleDict.forward: a ModuleDict is a container; index it in your forward."
        )
