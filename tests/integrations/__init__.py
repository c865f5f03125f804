"""planc installed and run by other tools: a wheel, the GitHub Action, pre-commit."""
