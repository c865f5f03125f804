"""The README and the docstrings stay true."""
