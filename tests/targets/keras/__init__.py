"""planc/targets/keras/: see tests/targets/__init__.py."""
