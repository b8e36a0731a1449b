"""The reference worker is an agent app built on the SDK: one runner per profile of its YAML
file, bids left to the market, failure triage only when asked for."""

from __future__ import annotations

from agora.llm import OfflineModelClient
from agora.sdk.runner import RecoveryPolicy
from agora.worker.app import SAMPLE_AGENTS, WorkerSettings, load_profiles, worker_agents


def test_each_profile_is_an_agent_with_its_own_runner_and_market_bids() -> None:
    profiles = load_profiles(SAMPLE_AGENTS)
    agents = worker_agents(WorkerSettings(), OfflineModelClient())

    # Each takes as many runs at once as the worker runs (AGORA_MAX_RUNS_IN_FLIGHT), and says so.
    runs = WorkerSettings().max_runs_in_flight
    declared = [p.model_copy(update={"max_concurrent_runs": runs}) for p in profiles]
    assert [a.profile for a in agents] == declared
    assert all(a.bids == "market" and a.estimate is None and a.handler is None for a in agents)
    runners = [a.runner for a in agents]
    assert len({id(r) for r in runners}) == len(agents), "one runner per agent"
    assert [r.config.max_iterations for r in runners if r] == [p.max_steps for p in profiles]
    assert all(r is not None and r.recovery is None for r in runners)
    assert all(a.instructions.startswith(f"You are {a.profile.agent_name}, skilled in ") for a in agents)


def test_triage_gives_the_runners_a_recovery_policy_with_the_repeat_limit() -> None:
    agents = worker_agents(WorkerSettings(triage_failures=True, triage_repeat_limit=1), OfflineModelClient())

    assert all(a.runner is not None and a.runner.recovery == RecoveryPolicy(repeat_limit=1) for a in agents)
