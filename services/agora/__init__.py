"""Agora: a Dapr-native control plane for multi-agent LLM systems."""

__version__ = "0.1.0"
