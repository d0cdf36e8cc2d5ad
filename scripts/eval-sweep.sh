#!/usr/bin/env bash
# The full sweep of the memory eval (docs/eval.md: all types, K = 1-8, both tiers), in stages, each resumable (rerun the script: finished runs are kept,
# `vibe eval --out` skips them). On 2 cores the whole of it takes well over a day; every stage ends with
# a report over everything in its folder, so a partial sweep is still a readable one.
#
#   stage 1  all twelve types, K = 1, seed 1, probes on, the 0.5B default  (~2 hours; the table in docs/eval.md)
#   stage 2  K = 2, 4, 8 on all twelve types, seed 1                        (~12 hours)
#   stage 3  seeds 2 and 3 on the cheap types (K = 1, 2)                    (~4 hours)
#   stage 4  the 1.5B tier on the four new types, constraint_fidelity, queue and waiting_on, K = 1: the
#            checkpoint, the handoff, the rewrite and the full context (~1 hour; installs the 1.5B first)
#   stage 5  the 1.5B tier's other strategies at K = 1, and K = 2 for all                (~8 hours)
#   stage 6  a first cut of stage 2: K = 2 and 4 on the five types where the strategies differ most, the
#            checkpoint and the handoff (its closest peer) only                          (~1 hour)
#   stage 7  the same five types and two strategies at K = 8                             (~1 hour)
#   stage 8  stages 6 and 7 again, with K = 1, after the scene guard and the whole-word probe checks
#            (8848240), into their own folder: K = 1, 2, 4                              (~1 hour)
#   stage 9  stage 8 at K = 8                                                            (~1 hour)
#
# Usage: bash scripts/eval-sweep.sh [STAGE...]   (default: 1)   Results under eval-sweep/ (gitignored).
# Types are ordered so the ones where the strategies differ most come first: a stage cut short has them.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
OUT="${EVAL_SWEEP_OUT:-eval-sweep}"
ORDER=(late_rule talkative_user revoked_long_ago self_correction constraint_fidelity waiting_on queue
  pitfalls authorisation_scope spoofed_user supersession mission_fade)
CHEAP=(constraint_fidelity mission_fade late_rule talkative_user revoked_long_ago self_correction)
DIFFER=(talkative_user revoked_long_ago late_rule self_correction constraint_fidelity)
TIER=(late_rule talkative_user revoked_long_ago self_correction constraint_fidelity queue waiting_on)
common=(--window 4096 --threshold 0.5)

types() { for t in "$@"; do printf -- '-t %s ' "$t"; done; }

stage() {
  case "$1" in
    1) .venv/bin/vibe eval $(types "${ORDER[@]}") --k 1 --model embedded "${common[@]}" --out "$OUT/0.5b" \
         --origin "bash scripts/eval-sweep.sh 1" ;;
    2) .venv/bin/vibe eval $(types "${ORDER[@]}") --k 2 --k 4 --k 8 --model embedded "${common[@]}" \
         --out "$OUT/0.5b" --origin "bash scripts/eval-sweep.sh 1 2" ;;
    3) .venv/bin/vibe eval $(types "${CHEAP[@]}") --seed 2 --seed 3 --k 1 --k 2 --model embedded \
         "${common[@]}" --out "$OUT/0.5b" --origin "bash scripts/eval-sweep.sh 1 2 3" ;;
    4) .venv/bin/vibe models install embedded-1.5b
       .venv/bin/vibe eval $(types "${TIER[@]}") --k 1 -s avibe-checkpoint -s handoff -s rewrite -s full \
         --model embedded-1.5b "${common[@]}" --out "$OUT/1.5b" --origin "bash scripts/eval-sweep.sh 4" ;;
    5) .venv/bin/vibe models install embedded-1.5b
       .venv/bin/vibe eval $(types "${TIER[@]}") --k 1 --k 2 --model embedded-1.5b "${common[@]}" \
         --out "$OUT/1.5b" --origin "bash scripts/eval-sweep.sh 4 5" ;;
    6) .venv/bin/vibe eval $(types "${DIFFER[@]}") --k 2 --k 4 -s avibe-checkpoint -s handoff --model embedded \
         "${common[@]}" --out "$OUT/0.5b" --origin "bash scripts/eval-sweep.sh 1 6" ;;
    7) .venv/bin/vibe eval $(types "${DIFFER[@]}") --k 8 -s avibe-checkpoint -s handoff --model embedded \
         "${common[@]}" --out "$OUT/0.5b" --origin "bash scripts/eval-sweep.sh 1 6 7" ;;
    8) .venv/bin/vibe eval $(types "${DIFFER[@]}") --k 1 --k 2 --k 4 -s avibe-checkpoint -s handoff \
         --model embedded "${common[@]}" --out "$OUT/0.5b-guard" --origin "bash scripts/eval-sweep.sh 8" ;;
    9) .venv/bin/vibe eval $(types "${DIFFER[@]}") --k 8 -s avibe-checkpoint -s handoff --model embedded \
         "${common[@]}" --out "$OUT/0.5b-guard" --origin "bash scripts/eval-sweep.sh 8 9" ;;
    *) echo "eval-sweep: no stage $1 (1-9)" >&2; exit 2 ;;
  esac
}

for s in "${@:-1}"; do
  stage "$s"
done
