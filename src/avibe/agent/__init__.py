"""Orchestration: Vibey's turn loop and the checkpoint driver. Adapters are passed in (DESIGN.md)."""
