"""Fetch the real-session set's segments that this repository does not keep (item 1).

Each session of src/avibe/evals/real/manifest.yaml is read at its commit - from raw.githubusercontent.com,
or from a local folder of git mirrors or file copies (--source) - its sha256 checked against the manifest,
its segment cut and scrubbed exactly as the kept ones were, and the result checked against the segment's
sha256 before it is written to the fetch folder (--dest, default AVIBE_REAL_SESSIONS or the user cache
dir's real-sessions/), where `vibe eval --set real` finds it. A changed byte anywhere fails that session
and writes nothing for it.

Usage:
  .venv/bin/python scripts/fetch_real_sessions.py                      # every session not kept here
  .venv/bin/python scripts/fetch_real_sessions.py --source /mirrors    # OWNER+NAME/ git mirrors, or
                                                                       # OWNER/NAME/[COMMIT/]PATH files
  .venv/bin/python scripts/fetch_real_sessions.py --only pvcase-ops --dest /tmp/real
  .venv/bin/python scripts/fetch_real_sessions.py --check             # also re-derive the kept ones
Exit status: 0 when every chosen session was fetched (or checked), 1 when any failed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from avibe.evals.realset import (
    KEPT_DIR,
    RealSessionError,
    default_fetch_dir,
    fetch,
    load_manifest,
    prepare,
    read_source,
    sha256_of,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, help="a local folder of git mirrors or file copies")
    parser.add_argument("--dest", type=Path, help="where the segments go (default: the fetch folder)")
    parser.add_argument("--only", action="append", default=[], help="a session id (repeat)")
    parser.add_argument(
        "--check", action="store_true", help="also derive the kept sessions from their source and compare"
    )
    args = parser.parse_args(argv)
    sessions = load_manifest()
    known = {s.id for s in sessions}
    for wanted in args.only:
        if wanted not in known:
            print(f"unknown session {wanted!r}; the manifest has {', '.join(sorted(known))}", file=sys.stderr)
            return 2
    dest = args.dest or default_fetch_dir()
    failed = 0
    for session in sessions:
        if args.only and session.id not in args.only:
            continue
        try:
            if session.kept:
                if not args.check:
                    continue
                kept = (KEPT_DIR / f"{session.id}.jsonl").read_bytes()
                if prepare(read_source(session, args.source), session) != kept:
                    raise RealSessionError(f"{session.id}: the kept file differs from its derived segment")
                print(f"{session.id}: kept here, matches its source (sha256 {sha256_of(kept)[:16]}...)")
                continue
            target = fetch(session, dest, args.source)
            print(f"{session.id}: {target}")
        except (RealSessionError, OSError) as err:
            failed += 1
            print(f"{session.id}: FAILED: {err}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
