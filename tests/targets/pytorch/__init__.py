"""The torch and hf targets: DTensor placements, the emitted torch module, Hugging Face tp
plans, and torchrun jobs of 4 gloo processes on the CPU (`worker.py`). Named `pytorch`, not
`torch`, so that no folder on a path can stand in for the torch package."""
