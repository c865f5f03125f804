"""Names loaded on first use: the one way planc imports by name (or reads a module named
by a string without running it) and the one shape of a package face whose names load
their modules lazily (docs/architecture.md, "Lint's path",
says why each is lazy).

    >>> face = lazy_face("planc", {"load_plan": "planc.plan"})
    >>> face("load_plan").__name__
    'load_plan'
"""

import sys

__all__ = ["import_module", "module_found", "module_source", "lazy_face"]


def import_module(name: str):
    """The module of absolute name `name`, imported: `importlib.import_module` without
    importing the `importlib` package (~0.4 ms of a start-up that needs nothing else of
    it)."""
    __import__(name)
    return sys.modules[name]


def module_found(name: str) -> bool:
    """Whether the module of absolute name `name` is installed, found without importing
    it (its parent packages are imported, as finding it needs)."""
    import importlib.util  # here: only these look-ups need it

    return importlib.util.find_spec(name) is not None


def module_source(name: str) -> str:
    """The source text of the module of absolute name `name`, found on the path and read
    without running it (its parent packages are imported, as finding it needs): a module
    written to be copied imports what only its copies need (jax, Keras)."""
    import importlib.util  # here: only these look-ups need it

    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"no module named {name!r}", name=name)
    return spec.loader.get_source(name)


def lazy_face(package: str, names: dict):
    """A module `__getattr__` for `package`: each name of `names` (name -> the module that
    defines it) is imported on first use, then stored in the package, so later lookups
    never reach this function."""
    def __getattr__(name: str):
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value
    return __getattr__
