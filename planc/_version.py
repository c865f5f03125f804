"""The package version, at the ground floor so that every stage can name it.

Its one home: pyproject.toml reads it from here (`[tool.setuptools.dynamic]`), and the
VS Code extension's package.json is held to it by a test.
"""

__version__ = "0.1.0"
