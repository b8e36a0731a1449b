"""Crews: agents working on one task in sequence, side by side or under a supervisor, and a
crew that puts its task on the market instead."""

from agora.sdk._crew import (
    Crew,
    CrewMember,
    CrewPattern,
    CrewResult,
    DaprMarket,
    MarketCrew,
    MarketCrewResult,
)

__all__ = ["Crew", "CrewMember", "CrewPattern", "CrewResult", "DaprMarket", "MarketCrew", "MarketCrewResult"]
