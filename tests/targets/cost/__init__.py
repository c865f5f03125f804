"""planc/targets/cost/: see tests/targets/__init__.py."""
