"""Inputs that do not come from the person typing: background commands (callbacks) and, later, watches,
timers and other sessions. Each is delivered through `avibe.ingress` with its source (SPEC T1)."""
