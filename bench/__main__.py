"""Run every benchmark; each writes its results under bench/results/."""

import importlib
from pathlib import Path

from bench import market_simulation, registry_filter

if __name__ == "__main__":
    registry_filter.main()
    market_simulation.main()
    # The end-to-end market benchmark is optional: run it when its module is present.
    if (Path(__file__).parent / "market_e2e.py").is_file():
        market_e2e = importlib.import_module("bench.market_e2e")
        if callable(getattr(market_e2e, "main", None)):
            market_e2e.main()
