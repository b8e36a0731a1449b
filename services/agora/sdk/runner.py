"""The ReAct runner behind an `Agent`, and its extension points: where a run's state is kept,
what watches its steps, who takes a paused run, what it remembers and learns."""

from agora.sdk._learning import InMemoryOutcomeHistory, OutcomeHistory
from agora.sdk._recovery import RecoveryPolicy
from agora.sdk._runner import (
    AgentDefinition,
    AgentRunner,
    AgentState,
    AgentStateStore,
    Escalator,
    ExecutionResult,
    InMemoryStateStore,
    MemoryManager,
    ReactStep,
    RunnerConfig,
    RunStatus,
    StepCheck,
    StepMonitor,
)

__all__ = [
    "AgentDefinition",
    "AgentRunner",
    "AgentState",
    "AgentStateStore",
    "Escalator",
    "ExecutionResult",
    "InMemoryOutcomeHistory",
    "InMemoryStateStore",
    "MemoryManager",
    "OutcomeHistory",
    "ReactStep",
    "RecoveryPolicy",
    "RunStatus",
    "RunnerConfig",
    "StepCheck",
    "StepMonitor",
]
