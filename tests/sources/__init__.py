"""Model sources read into variables, and sources nobody here wrote."""
