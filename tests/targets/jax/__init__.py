"""planc/targets/jax/: see tests/targets/__init__.py."""
