"""Escalation service: parks waiting parties in WAITING_FOR_HUMAN until a person decides."""
