"""No input crashes, hangs or misleads planc: fuzzing, regressions, security, resource limits."""
