"""kadence/quick_frozen.py: a frozen slotted dataclass given a quicker `__init__` makes the same
objects as the dataclass's own, stays frozen, and refuses classes it would get wrong."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from kadence.quick_frozen import quick_init
from streams.runtime.deferred import Entry
from streams.scheduler.entries import Ahead, Pending, Running
from streams.scheduler.step import Shot


@dataclasses.dataclass(frozen=True, slots=True)
class Plain:
    a: str
    b: int = 2
    c: bytes | None = None
    d: int = dataclasses.field(default=7, compare=False)


@quick_init
@dataclasses.dataclass(frozen=True, slots=True)
class Quick:
    a: str
    b: int = 2
    c: bytes | None = None
    d: int = dataclasses.field(default=7, compare=False)


def _values(obj: object) -> tuple[object, ...]:
    return tuple(getattr(obj, f.name) for f in dataclasses.fields(obj))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [(("x",), {}), (("x", 3), {}), (("x", 3, b"y", 9), {}), (("x",), {"d": 1, "c": b""})],
)
def test_it_makes_what_the_dataclass_makes(
    args: tuple[object, ...], kwargs: dict[str, object]
) -> None:
    quick, plain = Quick(*args, **kwargs), Plain(*args, **kwargs)  # type: ignore[arg-type]
    assert _values(quick) == _values(plain)
    assert quick == Quick(*args, **kwargs) and hash(quick) == hash(Quick(*args, **kwargs))  # type: ignore[arg-type]
    assert repr(quick) == repr(plain).replace("Plain", "Quick")
    assert dataclasses.replace(quick, b=5).b == 5


def test_it_keeps_the_signature_and_the_errors_of_a_wrong_call() -> None:
    assert list(inspect.signature(Quick).parameters) == list(inspect.signature(Plain).parameters)
    with pytest.raises(TypeError):
        Quick()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Quick("x", e=1)  # type: ignore[call-arg]


def test_what_it_makes_stays_frozen() -> None:
    quick = Quick("x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        quick.a = "y"  # type: ignore[misc]
    assert not hasattr(quick, "__dict__")


@pytest.mark.parametrize("cls", [Running, Ahead, Pending, Shot, Entry])
def test_the_scheduler_s_hot_records_use_it(cls: type) -> None:
    init = vars(cls)["__init__"]
    assert init.__code__.co_filename == "<string>"
    assert "_set0" in init.__globals__  # the slot setters, not object.__setattr__


def test_it_refuses_what_it_would_get_wrong() -> None:
    @dataclasses.dataclass(frozen=True)
    class NoSlots:
        a: int

    @dataclasses.dataclass(slots=True)
    class NotFrozen:
        a: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class Factory:
        a: list[int] = dataclasses.field(default_factory=list)

    @dataclasses.dataclass(frozen=True, slots=True)
    class Post:
        a: int

        def __post_init__(self) -> None:
            pass

    for cls in (NoSlots, NotFrozen, Factory, Post):
        with pytest.raises(TypeError):
            quick_init(cls)
