"""Reputation service: per-agent UCB reputation and calibration (`Reputation` actors)."""
