"""`Frozen`: the immutable record that AST nodes and IR objects are made of.

A record class declares each field once, as an annotation in its body, in field order
(after its base's fields), with its default where it has one:

    class Split(Node):
        axes: tuple[Name, ...]
        block: IntLit | None = None
        grouped: bool = False

The fields become the class's `__slots__`, and the class is built with one constructor
that every record class shares, made per class from its fields: it takes them by
position or by name, and refuses missing or unknown ones, as a dataclass's `__init__`
does. Names in the body's own `__slots__` are private state, not fields; a class that
derives such state from its fields (or makes a default afresh for each record) defines
`__post_init__`, which the constructor runs after storing the fields, while the record
can still be written.

Why not frozen dataclasses: Python 3.11 `exec`s each method a dataclass generates when
its module is imported (about half a millisecond a class), and each construction makes
an `object.__setattr__` call per field, past the `__setattr__` that refuses assignment.
A parse builds a dozen records per rule, so both showed: together a third of the time
of a large plan's parse and check.

So a constructor here is a plain function, as one written out by hand would be:

    def __new__(cls, span, axes, block=None, grouped=False):
        self = _new(_open)
        self.span = span
        ...
        if _post_init is not None:  # the class's `__post_init__`, if it has one
            _post_init(self)
        self.__class__ = cls
        return self

`_open` is the class's open twin: a subclass that adds no slots and keeps object's
`__setattr__`, so that each field is one plain store. Made as a twin, the instance then
becomes one of its class, whose `__setattr__` refuses any assignment from then on.

Compiling such a function costs ~150-450 us, and `planc lint` builds some 30 kinds of
record. So the code is written once for each number of fields, with placeholder names
(`_0`, `_1`, ...), and each class takes a copy of it renamed to its own fields
(`CodeType.replace`), with its twin, defaults and hook in the function's globals. The
templates for up to `WRITTEN` fields are functions of `planc._frozen_templates`, a module
written from `template_source` (`python -m planc.frozen` writes it again), which Python
caches as bytecode like any module: a lint compiles none of those it needs (the largest,
`PlanIR`, has 28 fields), which took ~2-4 ms of its start-up. A record of more fields has
its template compiled once per process, and a process's first `compile()` also builds
Python's AST types (~10 M instructions, a quarter of `python -c pass`). A class gets
its constructor on its first construction, so importing a module of records makes none.

The base gives a record what a frozen dataclass had: equality and hashing over its
compared fields, within its class; `repr`; pickling and copying; weak references; and
the `dataclasses` view (`fields`, `replace`, `is_dataclass`), built on first use, that
the IR's fingerprint and the language server read.
"""

from __future__ import annotations

import sys
from operator import attrgetter
from types import CodeType, FunctionType

# No `typing` on lint's path (docs/architecture.md, "Lint's path").
TYPE_CHECKING = False
if TYPE_CHECKING:
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


def _first_construction(cls, *args, **kwargs):
    """Each record class's `__new__` until its first construction, which makes the
    class's own constructor and puts it in its place."""
    new = _constructor(cls)
    type.__setattr__(cls, "__new__", staticmethod(new))
    return new(cls, *args, **kwargs)


def _constructor(cls: _RecordClass) -> FunctionType:
    """`cls`'s constructor: the template for its number of fields, renamed to them."""
    fields = cls._fields
    template = _template(len(fields))
    named = {f"_{i}": field for i, field in enumerate(fields)}
    code = template.replace(co_names=tuple(named.get(n, n) for n in template.co_names),
                            co_varnames=tuple(named.get(n, n) for n in template.co_varnames))
    twin = type.__new__(type(cls), cls.__name__, (cls,), {
        "__slots__": (), "__setattr__": object.__setattr__,
        "__delattr__": object.__delattr__, "__module__": cls.__module__,
        "__qualname__": f"{cls.__qualname__}._open"})
    defaults = tuple(cls._defaults[f] for f in fields if f in cls._defaults)
    scope = {"_new": object.__new__, "_open": twin, "__name__": cls.__module__,  # its module
             "_post_init": getattr(cls, "__post_init__", None)}
    new = FunctionType(code, scope, "__new__", defaults or None)
    new.__qualname__ = f"{cls.__qualname__}.__new__"  # as errors name it: `Name.__new__()`
    return new


# Constructor templates by number of fields, in this process.
_TEMPLATES: dict[int, CodeType] = {}
# The numbers of fields `planc._frozen_templates` has a template for: 0 to WRITTEN.
WRITTEN = 32


def template_source(arity: int, name: str = "__new__") -> str:
    """The source of the constructor `name` for `arity` fields named `_0`, `_1`, ...:
    the function `_template` compiles, and `planc._frozen_templates` holds."""
    params = ["cls", *(f"_{i}" for i in range(arity))]
    head, lines = f"def {name}(", []
    for p in params:  # the parameters wrapped as a person would, under 90 columns
        if len(head) + len(p) > 86:
            lines.append(head.rstrip())
            head = " " * 8
        head += f"{p}, "
    lines.append(head[:-2] + "):")
    body = ["self = _new(_open)", *(f"self.{p} = {p}" for p in params[1:]),
            "if _post_init is not None:", "    _post_init(self)",
            "self.__class__ = cls", "return self"]
    return "".join(f"{line}\n" for line in lines) + "".join(f"    {line}\n" for line in body)


def templates_module() -> str:
    """The text of `planc._frozen_templates`."""
    head = ('"""Constructor templates of `planc.frozen`, one for each number of fields up to '
            f'{WRITTEN}.\n\nWritten by `python -m planc.frozen` from '
            '`planc.frozen.template_source`; do not edit.\n"""\n\n'
            "# Each constructor's own, in the globals `planc.frozen` gives its copy.\n"
            "_new = _open = _post_init = None\n")
    return head + "".join(f"\n\n{template_source(n, f'new_{n}')}" for n in range(WRITTEN + 1))


def _template(arity: int) -> CodeType:
    """The constructor's code for `arity` fields named `_0`, `_1`, ... in order."""
    code = _TEMPLATES.get(arity)
    if code is None:
        where = f"<planc.frozen: a constructor of {arity} fields>"
        if arity <= WRITTEN:
            from planc import _frozen_templates

            code = getattr(_frozen_templates, f"new_{arity}").__code__.replace(
                co_name="__new__", co_qualname="__new__", co_filename=where)
        else:
            namespace: dict = {}
            exec(compile(template_source(arity), where, "exec", dont_inherit=True),
                 namespace)
            code = namespace["__new__"].__code__
        _TEMPLATES[arity] = code
    return code


def _is_class_var(annotation) -> bool:
    if isinstance(annotation, str):  # as `from __future__ import annotations` keeps them
        return annotation.startswith(("ClassVar", "typing.ClassVar"))
    # Evaluated, a ClassVar is typing's own object, so typing is loaded where there is one.
    typing = sys.modules.get("typing")
    return typing is not None and (annotation is typing.ClassVar or
                                   getattr(annotation, "__origin__", None) is typing.ClassVar)


def _getter(names: tuple[str, ...]):
    """A function of a record that returns the tuple of its fields `names`, at C speed."""
    if len(names) >= 2:
        return attrgetter(*names)
    if names:
        one = attrgetter(names[0])
        return lambda obj: (one(obj),)
    return lambda obj: ()


class _RecordClass(type):
    """The class of every record class: turns the fields a class body annotates into its
    slots, its defaults and the tuples `Frozen` reads."""

    def __new__(meta, name, bases, namespace, **kwargs):
        base = next((b for b in bases if isinstance(b, _RecordClass)), None)
        fields = list(base._fields) if base else []
        defaults = dict(base._defaults) if base else {}
        own = []
        for field, annotation in namespace.get("__annotations__", {}).items():
            if _is_class_var(annotation):
                continue
            if field.startswith("_") or field in ("cls", "self"):  # the constructor's own
                raise TypeError(f"{name}: a field cannot be named {field!r} (private state "
                                "goes in __slots__)")
            own.append(field)
            if field in namespace:  # a slot and a class attribute cannot share a name
                defaults[field] = namespace.pop(field)
            elif defaults:
                raise TypeError(f"{name}: field {field!r} without a default follows a field "
                                "with one")
        slots = namespace.get("__slots__", ())
        namespace["__slots__"] = (*own, *((slots,) if isinstance(slots, str) else slots))
        namespace["__new__"] = _first_construction
        cls = super().__new__(meta, name, bases, namespace, **kwargs)
        fields = tuple(fields + own)
        cls._fields = fields
        cls._defaults = defaults
        cls._compared = tuple(f for f in fields if f not in cls._not_compared)
        cls._shown = tuple(f for f in fields if f not in cls._not_shown)
        cls._key = staticmethod(_getter(cls._compared))
        cls._values = staticmethod(_getter(fields))
        return cls


class Frozen(metaclass=_RecordClass):
    """An immutable record; see the module's docstring for what a subclass declares."""

    __slots__ = ("__weakref__",)  # as a dataclass's instances, each can be weakly held
    # Fields left out of `==` and `hash` (where a thing stands, not what it says), and out
    # of `repr`. Each class names all of its own; a subclass inherits its base's.
    _not_compared: ClassVar[tuple[str, ...]] = ()
    _not_shown: ClassVar[tuple[str, ...]] = ()
    # Computed per class by `_RecordClass`.
    _fields: ClassVar[tuple[str, ...]] = ()
    _defaults: ClassVar[dict[str, object]] = {}
    _compared: ClassVar[tuple[str, ...]] = ()
    _shown: ClassVar[tuple[str, ...]] = ()
    # Functions of a record: the tuple of its compared fields, of all its fields.
    _key: ClassVar = staticmethod(lambda obj: ())
    _values: ClassVar = staticmethod(lambda obj: ())
    __dataclass_fields__ = _DataclassFields()

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


if __name__ == "__main__":  # `python -m planc.frozen`: write `planc._frozen_templates`
    import os

    with open(os.path.join(os.path.dirname(__file__), "_frozen_templates.py"), "w",
              encoding="utf-8", newline="\n") as f:
        f.write(templates_module())
