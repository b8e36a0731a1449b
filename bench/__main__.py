"""Run every benchmark; each writes its results under bench/results/."""

from bench import registry_filter

if __name__ == "__main__":
    registry_filter.main()
