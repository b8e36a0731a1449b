"""Uncertainty monitor: confidence per step → proceed / log / pause for a human / abort."""
