"""The command line: argument parsing, help, output files, determinism."""
