"""The Helm chart on a real Kubernetes node (the kubelet, containerd, runc) and control plane, all
inside namespaces of their own with only loopback: control_plane.py and node.py start them,
node_scenario.py and agora_on_node.py exercise the node and the chart, and
tests/integration/test_kubernetes_node.py runs the scenario."""
