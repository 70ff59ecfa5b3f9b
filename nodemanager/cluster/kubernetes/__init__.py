"""The Kubernetes cluster source: watches, binds, drains, events and leader election."""
