"""The apps of `bench/checked_sums.py`: its agents file and its checker app."""
