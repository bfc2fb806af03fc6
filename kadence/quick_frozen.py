"""Frozen slotted dataclasses that are cheap to make.

A frozen dataclass's generated `__init__` sets each field through `object.__setattr__` (its own
`__setattr__` refuses): a call through the generic attribute machinery per field. On Python
3.11 an object of five fields costs 580-650 ns to make, and the scheduler makes three such
objects per run it fires (the run's `Shot`, its `Running` and `Ahead` entries). `quick_init`
gives the class an `__init__` of the same signature that sets each slot through the slot's own
descriptor: 300 ns for five fields. Everything else the dataclass made (equality, hash, repr,
`dataclasses.replace`, `fields`, the frozen `__setattr__`) is left as it was.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

T = TypeVar("T")


def quick_init(cls: type[T]) -> type[T]:
    """Replace the `__init__` of `cls`, a frozen dataclass with slots and without
    `__post_init__`, `InitVar` or default factories, by one that sets its slots directly."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in cls.__dict__:
        raise TypeError(f"{cls.__name__} is not a frozen dataclass with slots")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} has a __post_init__: quick_init would skip it")
    names: list[str] = []
    space: dict[str, Any] = {}
    lines: list[str] = []
    for i, f in enumerate(dataclasses.fields(cls)):  # type: ignore[arg-type]
        if not f.init:
            raise TypeError(f"{cls.__name__}.{f.name} is not an __init__ argument")
        if f.default_factory is not dataclasses.MISSING:
            raise TypeError(f"{cls.__name__}.{f.name} has a default factory")
        if f.default is dataclasses.MISSING:
            names.append(f.name)
        else:
            space[f"_default{i}"] = f.default
            names.append(f"{f.name}=_default{i}")
        space[f"_set{i}"] = cls.__dict__[f.name].__set__  # the slot's descriptor
        lines.append(f"    _set{i}(self, {f.name})")
    args = ", ".join(["self", *names])
    source = f"def __init__({args}):\n" + ("\n".join(lines) or "    pass") + "\n"
    exec(source, space)  # noqa: S102 (only field names of a dataclass go into it)
    init = space["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = cls.__init__.__doc__
    cls.__init__ = init  # type: ignore[method-assign]
    return cls
