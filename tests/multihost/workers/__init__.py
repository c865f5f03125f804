"""The programs the multihost tests start as processes, and the helpers that start them."""
