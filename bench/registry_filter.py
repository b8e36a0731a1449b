"""`filter_capable` latency: the capability index against a linear scan, same profiles, same
queries, same run.

Population (seeded): 200 distinct skills; each agent has 3-8 skills drawn Zipf-like (weight
1/rank) without repeats; queries have 1-3 required and 0-3 preferred skills drawn the same way;
answers are capped at 5 (the registry's default `max_candidates`).
"""

from __future__ import annotations

import json
import platform
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from agora.core.capability_index import CapabilityIndex
from agora.core.models import CapabilityProfile

SEED = 20261121
SKILLS = [f"skill-{i:03d}" for i in range(200)]
WEIGHTS = [1.0 / (rank + 1) for rank in range(len(SKILLS))]
SIZES = (1_000, 10_000, 100_000)
INDEX_QUERIES = 2_000
SCAN_QUERIES = 200
LIMIT = 5
RESULTS = Path(__file__).parent / "results" / "registry_filter.json"


def draw_skills(rng: random.Random, count: int) -> list[str]:
    chosen: list[str] = []
    while len(chosen) < count:
        skill = rng.choices(SKILLS, WEIGHTS)[0]
        if skill not in chosen:
            chosen.append(skill)
    return chosen


def population(size: int, rng: random.Random) -> list[CapabilityProfile]:
    return [
        CapabilityProfile.model_construct(
            agent_id=f"agent-{i:06d}", agent_name=f"Agent {i}", skill_tags=draw_skills(rng, rng.randint(3, 8))
        )
        for i in range(size)
    ]


def queries(count: int, rng: random.Random) -> list[tuple[list[str], list[str]]]:
    drawn = []
    for _ in range(count):
        skills = draw_skills(rng, rng.randint(1, 3) + rng.randint(0, 3))
        required_count = min(len(skills), rng.randint(1, 3))
        drawn.append((skills[:required_count], skills[required_count:]))
    return drawn


class LinearScan:
    """The obvious implementation: test every profile, sort the capable ones."""

    def __init__(self, profiles: list[CapabilityProfile]) -> None:
        self._rows = [(p.agent_id, frozenset(p.skill_tags), p) for p in profiles]

    def filter_capable(
        self, required: list[str], preferred: list[str], limit: int
    ) -> list[CapabilityProfile]:
        need, want = frozenset(required), frozenset(preferred)
        ranked = [(-len(want & skills), agent_id, p) for agent_id, skills, p in self._rows if need <= skills]
        ranked.sort(key=lambda row: (row[0], row[1]))
        return [p for _, _, p in ranked[:limit]]


def latencies_ms(
    run: Callable[[list[str], list[str], int], list[CapabilityProfile]], qs: list[tuple[list[str], list[str]]]
) -> list[float]:
    samples = []
    for required, preferred in qs:
        start = time.perf_counter_ns()
        run(required, preferred, LIMIT)
        samples.append((time.perf_counter_ns() - start) / 1e6)
    return samples


def percentile(samples: list[float], q: float) -> float:
    return statistics.quantiles(samples, n=1000, method="inclusive")[int(q * 10) - 1]


def main() -> None:
    rows = []
    for size in SIZES:
        rng = random.Random(SEED + size)
        profiles = population(size, rng)
        qs = queries(INDEX_QUERIES, rng)
        index = CapabilityIndex()
        start = time.perf_counter()
        index.replace_all(profiles)
        build_s = time.perf_counter() - start
        scan = LinearScan(profiles)
        for required, preferred in qs[:SCAN_QUERIES]:  # same answers, or the comparison is void
            assert index.filter_capable(required, preferred, LIMIT) == scan.filter_capable(
                required, preferred, LIMIT
            )
        indexed = latencies_ms(index.filter_capable, qs)
        scanned = latencies_ms(scan.filter_capable, qs[:SCAN_QUERIES])
        start = time.perf_counter()
        writes = 1_000
        for i in range(writes):
            index.upsert(profiles[i].model_copy(update={"skill_tags": draw_skills(rng, 4)}))
        upsert_us = (time.perf_counter() - start) / writes * 1e6
        row = {
            "profiles": size,
            "index_p50_ms": round(percentile(indexed, 50), 4),
            "index_p99_ms": round(percentile(indexed, 99), 4),
            "scan_p50_ms": round(percentile(scanned, 50), 4),
            "scan_p99_ms": round(percentile(scanned, 99), 4),
            "speedup_p50": round(percentile(scanned, 50) / percentile(indexed, 50), 1),
            "index_build_s": round(build_s, 3),
            "upsert_mean_us": round(upsert_us, 1),
        }
        rows.append(row)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "benchmark": "registry filter_capable",
                "machine": f"{platform.machine()} Python {platform.python_version()}",
                "seed": SEED,
                "index_queries": INDEX_QUERIES,
                "scan_queries": SCAN_QUERIES,
                "results": rows,
            },
            indent=2,
        )
        + "\n"
    )
    print("filter_capable latency (ms), capability index vs linear scan, limit 5")
    header = ("profiles", "index p50", "index p99", "scan p50", "scan p99")
    print("{:>9} | {:>9} {:>9} | {:>9} {:>9} | speedup | upsert µs".format(*header))
    for r in rows:
        print(
            f"{r['profiles']:>9} | {r['index_p50_ms']:>9.3f} {r['index_p99_ms']:>9.3f} | "
            f"{r['scan_p50_ms']:>9.3f} {r['scan_p99_ms']:>9.3f} | "
            f"{r['speedup_p50']:>6.1f}x | {r['upsert_mean_us']:>8.1f}"
        )
    print(f"written to {RESULTS}")


if __name__ == "__main__":
    main()
