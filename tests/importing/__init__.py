"""`planc import`: plans from Keras layout maps and Hugging Face styles, and the plan zoo."""
