"""Agora benchmarks (`make bench`)."""
