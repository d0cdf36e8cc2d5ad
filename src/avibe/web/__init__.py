"""The web edge: `vibe serve` (the HTTP API, the hosts of live sessions) and the inspector."""
