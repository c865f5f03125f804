"""planc/targets/aot/: see tests/targets/__init__.py."""
