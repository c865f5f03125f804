"""planc/targets/emit/: see tests/targets/__init__.py."""
