"""The torch and hf targets: DTensor placements, the emitted torch module, Hugging Face tp
plans, and torchrun jobs of 4 gloo processes on the CPU (`worker.py`). A package (with
this file), so it is `tests.targets.torch` and never stands in for the torch package:
neither pytest nor torchrun puts `tests/targets/` itself on `sys.path`."""
