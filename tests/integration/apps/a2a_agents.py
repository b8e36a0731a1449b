"""An agents file of A2A agents only: each `name=url` of AGORA_TEST_A2A_AGENTS (comma-separated)
is an `A2AAgent` reached at `url` through the agent app's sidecar."""

import os

from agora.sdk import A2AAgent

agents = [
    A2AAgent(name, url)
    for name, url in (entry.split("=", 1) for entry in os.environ["AGORA_TEST_A2A_AGENTS"].split(","))
]
