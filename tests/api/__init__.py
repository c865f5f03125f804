"""The Python API, what `import planc` loads, and the records its objects are made of."""
