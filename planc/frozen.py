"""`Frozen`: the immutable record that AST nodes and IR objects are made of.

Frozen dataclasses cost Python 3.11 an `exec` for each method they generate when their
module is imported (about half a millisecond a class), and each construction an
`object.__setattr__` call per field, past the `__setattr__` that refuses assignment. A
parse builds a dozen records per rule, so both showed: together a third of the time of a
large plan's parse and check.

A `Frozen` subclass lists its fields in `__slots__`, in field order (a slot named `_...`
is private state, not a field), and builds each instance in its own `__new__`, which
takes the fields in that order:

    def __new__(cls, span, text):
        self = _new(cls._open)
        self.span = span
        self.text = text
        self.__class__ = cls
        return self

`cls._open` is the class's open twin: a subclass that adds no slots and keeps object's
`__setattr__`, so that each field is one plain store. Made as a twin, the instance then
becomes one of its class, whose `__setattr__` refuses any assignment from then on. The
base gives a record what a frozen dataclass had: equality and hashing over its compared
fields, within its class; `repr`; pickling and copying; weak references; and the
`dataclasses` view (`fields`, `replace`, `is_dataclass`), built on first use, that the
IR's fingerprint and the language server read.
"""

from __future__ import annotations

from operator import attrgetter
from typing import ClassVar


class FrozenError(AttributeError):
    """An assignment to a field of a `Frozen` record (dataclasses' FrozenInstanceError
    is an AttributeError too)."""


class _DataclassFields:
    """`__dataclass_fields__` of a `Frozen` class, as `dataclasses` reads it: built once per
    class by `dataclasses.make_dataclass`, so each is a real `dataclasses.Field`."""

    def __get__(self, obj, cls):
        fields = cls.__dict__.get("_dataclass_fields")
        if fields is None:
            import dataclasses  # only the few readers of this view pay for the module

            shadow = dataclasses.make_dataclass(
                cls.__name__,
                [(name, object, dataclasses.field(compare=name in cls._compared,
                                                  repr=name in cls._shown))
                 for name in cls._fields],
                namespace={"__doc__": cls.__doc__ or cls.__name__},
                init=False, repr=False, eq=False)
            fields = shadow.__dataclass_fields__
            type.__setattr__(cls, "_dataclass_fields", fields)
        return fields


class _OpenTwin:
    """`cls._open`: made on first use, so that importing a module of records makes none.
    Two threads may each make one; either serves, as both have the class's layout."""

    def __get__(self, obj, cls):
        twin = type(cls.__name__, (cls,), {
            "__slots__": (), "__setattr__": object.__setattr__,
            "__delattr__": object.__delattr__, "__module__": cls.__module__,
            "__qualname__": f"{cls.__qualname__}._open", "_twin": True})
        type.__setattr__(cls, "_open", twin)
        return twin


class Frozen:
    """An immutable record; see the module's docstring for what a subclass declares."""

    __slots__ = ("__weakref__",)  # as a dataclass's instances, each can be weakly held
    # Fields left out of `==` and `hash` (where a thing stands, not what it says), and out
    # of `repr`. Each class names all of its own; a subclass inherits its base's.
    _not_compared: ClassVar[tuple[str, ...]] = ()
    _not_shown: ClassVar[tuple[str, ...]] = ()
    # Computed per class by `__init_subclass__`.
    _fields: ClassVar[tuple[str, ...]] = ()
    _compared: ClassVar[tuple[str, ...]] = ()
    _shown: ClassVar[tuple[str, ...]] = ()
    # Functions of a record: the tuple of its compared fields, of all its fields.
    _key: ClassVar = staticmethod(lambda obj: ())
    _values: ClassVar = staticmethod(lambda obj: ())
    __dataclass_fields__ = _DataclassFields()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("_twin"):
            return
        # Each class its own twin: a base's would not have the class's slots.
        type.__setattr__(cls, "_open", _OpenTwin())
        slots = cls.__dict__.get("__slots__", ())
        own = (slots,) if isinstance(slots, str) else slots
        fields = cls._fields + tuple(s for s in own if s[0] != "_")  # a base's fields first
        cls._fields = fields
        cls._compared = tuple(f for f in fields if f not in cls._not_compared)
        cls._shown = tuple(f for f in fields if f not in cls._not_shown)
        cls._key = staticmethod(_getter(cls._compared))
        cls._values = staticmethod(_getter(fields))

    def __setattr__(self, name, value):
        raise FrozenError(f"cannot assign to field {name!r}")

    def __delattr__(self, name):
        raise FrozenError(f"cannot delete field {name!r}")

    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return self._key(self) == self._key(other)
        return NotImplemented

    def __hash__(self):
        return hash(self._key(self))

    def __repr__(self):
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._shown)
        return f"{type(self).__qualname__}({shown})"

    def _replace(self, **changes):
        """This record with the fields `changes` names set anew (`dataclasses.replace`)."""
        values = dict(zip(self._fields, self._values(self)))
        values.update(changes)
        return self.__class__(**values)

    def __reduce__(self):
        return self.__class__, self._values(self)


def _getter(names: tuple[str, ...]):
    """A function of a record that returns the tuple of its fields `names`, at C speed."""
    if len(names) >= 2:
        return attrgetter(*names)
    if names:
        one = attrgetter(names[0])
        return lambda obj: (one(obj),)
    return lambda obj: ()
