"""Run every benchmark; each writes its results under bench/results/."""

from bench import (
    checked_sums,
    debate_gate,
    debate_run,
    escalations,
    event_streams,
    flood,
    graph_run,
    input_bounds,
    market_agent_bids,
    market_bill,
    market_e2e,
    market_hops,
    market_simulation,
    planner_plan,
    registry_filter,
    replicas,
    soak,
    summary,
)

if __name__ == "__main__":
    registry_filter.main()
    input_bounds.main()
    market_simulation.main()
    market_e2e.main()
    replicas.main()
    market_agent_bids.main()
    market_bill.main()
    checked_sums.main()
    market_hops.main()
    escalations.main()
    event_streams.main()
    planner_plan.main()
    debate_run.main()
    debate_gate.main()
    graph_run.main()
    soak.main()
    flood.main()
    summary.main()
