"""The benchmark scripts keep running."""
