"""Models behind a router (each step on the cheapest model of the tier it needs, falling back
along a chain), and what their calls cost."""

from agora.core.models import ModelTier
from agora.sdk._cost import CostSummary, CostTracker, EventPublisher, StepCost
from agora.sdk._router import (
    DEFAULT_FALLBACK_CHAIN,
    ModelRouter,
    ModelSpec,
    RoutedCompletion,
    RoutingRule,
)

__all__ = [
    "DEFAULT_FALLBACK_CHAIN",
    "CostSummary",
    "CostTracker",
    "EventPublisher",
    "ModelRouter",
    "ModelSpec",
    "ModelTier",
    "RoutedCompletion",
    "RoutingRule",
    "StepCost",
]
