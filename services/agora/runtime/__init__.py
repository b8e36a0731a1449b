"""The thin Dapr layer every service stands on: sidecar client, state, pub/sub, actors, tracing."""
