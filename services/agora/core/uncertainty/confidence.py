"""The confidence scale: a confidence is a number in [0, 1], clamped and rounded to 12 decimal
places, so that worked numbers that are exact on paper (0.4 * 0.75 + 0.6 * 0.9 ...) land exactly
on a threshold instead of a float's width below it."""

from __future__ import annotations

__all__ = ["ROUND_DIGITS", "check_unit", "unit"]

ROUND_DIGITS = 12


def unit(value: float) -> float:
    """Clamp to [0, 1] and round away float noise."""
    return round(min(1.0, max(0.0, value)), ROUND_DIGITS)


def check_unit(name: str, value: float) -> None:
    """Refuse (`ValueError`) a `value` outside [0, 1], naming it."""
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {value!r}")
