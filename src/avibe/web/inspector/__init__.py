"""The web inspector: a session's record, checkpoints and context over time, in the browser.

`inspector_app(store, key=..., eval_dir=...)` is a Starlette app: `vibe serve` mounts it at /inspect,
`vibe inspect` serves it alone on 127.0.0.1. Read-only. See `app.py` for the pages."""

from avibe.web.inspector.app import inspector_app

__all__ = ["inspector_app"]
