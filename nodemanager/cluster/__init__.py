"""Cluster sources: where pods and nodes come from (the official client, or a simulation)."""
