"""The allocator's settings from the environment: the exploration weight."""

from __future__ import annotations

import pydantic
import pytest

from agora.allocator.app import AllocatorSettings
from agora.core.scoring import MARKET_EXPLORATION


def test_the_allocator_damps_exploration_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGORA_EXPLORATION_WEIGHT", raising=False)
    assert AllocatorSettings().exploration_weight == MARKET_EXPLORATION == 0.1


def test_exploration_weight_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGORA_EXPLORATION_WEIGHT", "0.25")
    assert AllocatorSettings().exploration_weight == 0.25


@pytest.mark.parametrize("value", ["-0.5", "nan", "inf", "lots"])
def test_an_invalid_exploration_weight_is_refused_at_start(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("AGORA_EXPLORATION_WEIGHT", value)
    with pytest.raises(pydantic.ValidationError, match="exploration_weight"):
        AllocatorSettings()
