#!/usr/bin/env bash
# Claims with intervals (docs/eval.md): the checkpoint against the handoff, the rewrite and the full context, with paired
# intervals, on the five types where the strategies differ and on the real-session set, per tier. Every
# stage is resumable (rerun it: `vibe eval --out` skips finished runs) and ends with a report over all
# that its folder holds, so a sweep cut short is still a readable one; each row keeps the commit it ran at.
# Seeds run one after another over all five types, so a stage cut short has every type at the early seeds.
# The checkpoint's two other renderings (rules-last, plain) and its probes without the reminder after the
# question (no-reminder) share its replay: they cost probe calls only.
#
#   stage 1  0.5B, five types, K = 1, seeds 1-3          (~1.5 hours on 2 cores)
#   stage 2  0.5B, five types, K = 4, seeds 1-3          (~4 hours)
#   stage 3  0.5B, the real set (as cut)                 (~4 hours)
#   stage 4  1.5B, five types, K = 1, seeds 1-3          (~4 hours; installs the 1.5B first)
#   stage 5  1.5B, five types, K = 4, seeds 1-3          (~10 hours)
#   stage 6  1.5B, the real set                          (~8 hours)
#
# Usage: bash scripts/eval-intervals.sh [STAGE...]   (default: 1)   Results under eval-intervals/ (gitignored).
# REAL_SOURCE=DIR fetches the real sessions from a folder of git mirrors (OWNER+NAME/) instead of GitHub.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
OUT="${EVAL_INTERVALS_OUT:-eval-intervals}"
DIFFER=(late_rule talkative_user revoked_long_ago self_correction constraint_fidelity)
STRATEGIES=(avibe-checkpoint avibe-checkpoint:rules-last avibe-checkpoint:plain avibe-checkpoint:no-reminder
            handoff rewrite full)
common=(--window 4096 --threshold 0.5)

flags() { local f="$1"; shift; for v in "$@"; do printf -- '%s %s ' "$f" "$v"; done; }

types_at() {  # model, folder, K, stage list for the origin line
  for seed in 1 2 3; do
    .venv/bin/vibe eval $(flags -t "${DIFFER[@]}") $(flags -s "${STRATEGIES[@]}") --seed "$seed" --k "$3" \
      --model "$1" "${common[@]}" --out "$OUT/$2" --origin "bash scripts/eval-intervals.sh $4"
  done
}

real_set() {  # model, folder, stage list
  .venv/bin/python scripts/fetch_real_sessions.py ${REAL_SOURCE:+--source "$REAL_SOURCE"}
  .venv/bin/vibe eval --set real $(flags -s "${STRATEGIES[@]}") --model "$1" "${common[@]}" --out "$OUT/$2" \
    --origin "bash scripts/eval-intervals.sh $3"
}

stage() {
  case "$1" in
    1) types_at embedded 0.5b 1 "1" ;;
    2) types_at embedded 0.5b 4 "1 2" ;;
    3) real_set embedded 0.5b "1 2 3" ;;
    4) .venv/bin/vibe models install embedded-1.5b && types_at embedded-1.5b 1.5b 1 "4" ;;
    5) .venv/bin/vibe models install embedded-1.5b && types_at embedded-1.5b 1.5b 4 "4 5" ;;
    6) .venv/bin/vibe models install embedded-1.5b && real_set embedded-1.5b 1.5b "4 5 6" ;;
    *) echo "eval-intervals: no stage $1 (1-6)" >&2; exit 2 ;;
  esac
}

for s in "${@:-1}"; do
  stage "$s"
done
