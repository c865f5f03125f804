"""The package version, at the ground floor so that every stage can name it."""

__version__ = "0.1.0"
