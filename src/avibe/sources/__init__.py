"""Inputs that do not come from the person typing: background commands (callbacks) and, later, watches,
timers and other sessions. Each is handed to a `Delivery` port (avibe.ports) with its source (SPEC T1);
the orchestration passes in one that records it through `avibe.ingress`, which adapters never import."""
