"""`planc suggest`: plans written for a model."""
