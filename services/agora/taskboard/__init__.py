"""Task board service: every task and its bids, and the task lifecycle (`Task` actors)."""
