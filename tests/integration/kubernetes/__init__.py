"""The Helm chart on a real Kubernetes control plane with Dapr's own sidecar injector, all inside a
network namespace that has only loopback (control_plane.py starts it, scenario.py exercises the
chart, tests/integration/test_kubernetes.py runs the scenario)."""
