"""`python -m avibe` is `vibe` (how Avibe starts a process of its own, e.g. a delegated run)."""

from avibe.cli import main

main()
