"""The planner service: long-horizon tasks as subgoal DAGs, each subgoal run through the market."""
