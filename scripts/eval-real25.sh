#!/usr/bin/env bash
# The real set's run (docs/eval/real-25/): the checkpoint, the handoff, the rewrite and observation masking
# on both embedded tiers at the eval's default window, one session at a time (`--set real:ID`) so a run
# cut short keeps every session it finished. Real sessions have no seed (nothing is generated): each
# (session, strategy) runs once; the embedded model decodes greedily, so a second seed would repeat it.
# Resumable: rerun the same stage and `vibe eval --out` skips finished runs; each stage ends with the
# report over all its folder holds. Results under eval-real25/ (gitignored); copy a folder back there from
# docs/eval/real-25/ to go on from a committed run (redacted rows are skipped like any finished run).
#
#   stage 1  1.5B, checkpoint and handoff        (the goal's comparison; ~15 min a session on 2 cores)
#   stage 2  1.5B, rewrite and mask
#   stage 3  0.5B, all four
#
# Usage: bash scripts/eval-real25.sh STAGE [SESSION...]   (default: every session, in the order below)
# REAL_SOURCE=DIR fetches the real sessions from a folder of git mirrors (OWNER+NAME/) instead of GitHub.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${EVAL_REAL25_OUT:-eval-real25}"
# sessions with three probes first, then the rest; a stage walks them in this order
ORDER=(campaign-audit jgive-phases mclaude-slate mclaude-transcripts meow-qqbot posthog-impact posthog-summary
       rain-template solpro-database subly-deposits twork-memo twork-purchases mclaude-audit mclaude-gpg
       mclaude-homeserver mclaude-journals mclaude-panel edgerunner-backend fundwise-zerion pvcase-ops
       raveera-tickets pln-odio scout-video solpro-backoffice soulpass-employer)

stage="${1:?usage: bash scripts/eval-real25.sh STAGE [SESSION...]}"
shift
case "$stage" in
  1) model=embedded-1.5b folder=1.5b strategies=(avibe-checkpoint handoff) ;;
  2) model=embedded-1.5b folder=1.5b strategies=(rewrite mask) ;;
  3) model=embedded folder=0.5b strategies=(avibe-checkpoint handoff rewrite mask) ;;
  *) echo "eval-real25: no stage $stage (1-3)" >&2; exit 2 ;;
esac
sessions=("${@:-${ORDER[@]}}")
.venv/bin/vibe models install "$model" >/dev/null
.venv/bin/python scripts/fetch_real_sessions.py ${REAL_SOURCE:+--source "$REAL_SOURCE"} >/dev/null
for id in "${sessions[@]}"; do
  args=(--set "real:$id" --model "$model" --out "$OUT/$folder" --origin "bash scripts/eval-real25.sh (stages 1-3)")
  for s in "${strategies[@]}"; do args+=(-s "$s"); done
  echo "== $(date -u +%H:%M:%S) $model $id: ${strategies[*]}"
  .venv/bin/vibe eval "${args[@]}" --no-plots
done
