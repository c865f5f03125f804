"""What `planc lint`, `explain`, `diff` and `--golden` report."""
