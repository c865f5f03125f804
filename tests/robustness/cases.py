"""How many cases each fuzzing test runs, derandomized: the suite sees the same cases every
run, and `make fuzz` explores new ones."""

from hypothesis import HealthCheck, settings


def fixed_cases(max_examples: int) -> settings:
    return settings(max_examples=max_examples, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))
