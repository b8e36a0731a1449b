"""How long the input bounds of `agora.core.limits` take on oversized input (the pure core,
no Dapr): deduplicating skill tags, and refusing a profile with far too many of them.

The unit tests (tests/unit/test_boundaries.py) check the properties that keep these fast
without a clock: about one comparison per repeated tag, and a list past its bound refused on
its length alone. This measures the time itself, against the budget the unit tests once
asserted: 200,000 tags in under a second for each.

- `clean_skill_tags` over n tags, a quarter of them distinct: time per call (best of
  `REPEATS`) and per tag; linear when the time per tag stays flat as n grows.
- `CapabilityProfile` refusing n skill tags (the bound is `MAX_SKILL_TAGS`): time per call
  (best of `REPEATS`); it should not grow with n, as no tag past the bound is looked at.
"""

from __future__ import annotations

import json
import platform
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from agora.core.limits import MAX_SKILL_TAGS, clean_skill_tags
from agora.core.models import CapabilityProfile

SIZES = (20_000, 200_000, 1_000_000)
REPEATS = 5
BUDGET_TAGS = 200_000
BUDGET_S = 1.0
RESULTS = Path(__file__).parent / "results" / "input_bounds.json"


def best_of(run: Callable[[list[str]], object], tags: list[str]) -> float:
    """The shortest of `REPEATS` runs of `run(tags)`, in seconds (the one the rest of the
    machine disturbed least)."""
    timings = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        run(tags)
        timings.append(time.perf_counter() - start)
    return min(timings)


def refuse_profile(tags: list[str]) -> None:
    try:
        CapabilityProfile(agent_id="a", agent_name="A", skill_tags=tags)
    except ValidationError:
        return
    raise AssertionError(f"a profile with {len(tags)} skill tags was accepted (bound {MAX_SKILL_TAGS})")


def main() -> None:
    rows = []
    for size in SIZES:
        repeated = [f"tag{i % (size // 4)}" for i in range(size)]
        distinct = [f"t{i}" for i in range(size)]
        if len(clean_skill_tags(repeated)) != size // 4:  # the right answer, or the timing is void
            raise AssertionError("clean_skill_tags lost or kept a repeat")
        clean_s = best_of(clean_skill_tags, repeated)
        refuse_s = best_of(refuse_profile, distinct)
        rows.append(
            {
                "tags": size,
                "clean_skill_tags_ms": round(clean_s * 1e3, 3),
                "clean_skill_tags_ns_per_tag": round(clean_s / size * 1e9, 1),
                "profile_refused_ms": round(refuse_s * 1e3, 3),
            }
        )
    at_budget = next(r for r in rows if r["tags"] == BUDGET_TAGS)
    clean_met = at_budget["clean_skill_tags_ms"] < BUDGET_S * 1e3
    refusal_met = at_budget["profile_refused_ms"] < BUDGET_S * 1e3
    result = {
        "benchmark": "input bounds on oversized input (pure core, no Dapr)",
        "machine": f"{platform.machine()} Python {platform.python_version()}",
        "repeats": REPEATS,
        "max_skill_tags": MAX_SKILL_TAGS,
        "budget": {
            "tags": BUDGET_TAGS,
            "seconds": BUDGET_S,
            "clean_skill_tags_met": clean_met,
            "profile_refused_met": refusal_met,
        },
        "results": rows,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"input bounds, best of {REPEATS} (budget: {BUDGET_TAGS:,} tags in under {BUDGET_S:g} s each)")
    print(f"{'tags':>10} | {'clean ms':>10} {'ns/tag':>8} | {'refused ms':>10}")
    for r in rows:
        print(
            f"{r['tags']:>10,} | {r['clean_skill_tags_ms']:>10.3f} "
            f"{r['clean_skill_tags_ns_per_tag']:>8.1f} | {r['profile_refused_ms']:>10.3f}"
        )
    print(f"budget met: clean_skill_tags {clean_met}, refusal {refusal_met}")
    print(f"written to {RESULTS}")


if __name__ == "__main__":
    main()
