#!/usr/bin/env bash
# The memory evaluation behind the tables in docs/eval.md, on the embedded 0.5B model (~4 hours on 2 cores):
# all twelve scenario types at K = 1, the K sweep (2, 4, 8) on constraint_fidelity and mission_fade, all
# seven strategies, window 4,096, compaction above half of it. Every step appends to the same results
# file and is resumable; the last one writes the report over all of them into $OUT (default eval-embedded);
# then the probes (queue, waiting_on at K = 1) into $OUT-probes. The four types where the strategies
# differ most (late_rule, talkative_user, revoked_long_ago, self_correction) with probes at K = 1 took
# about 40 minutes (README, "the types where the strategies differ").
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
OUT="${1:-eval-embedded}"
common=(--model embedded --window 4096 --threshold 0.5 --no-probes --out "$OUT" --origin "bash scripts/eval-embedded.sh")
.venv/bin/vibe eval --k 1 "${common[@]}"
for type in constraint_fidelity mission_fade; do
  for k in 2 4 8; do
    .venv/bin/vibe eval -t "$type" --k "$k" "${common[@]}"
  done
done
# Probes answered by the same model from each compacted context, in a folder of their own.
.venv/bin/vibe eval -t queue -t waiting_on --k 1 --model embedded --window 4096 --threshold 0.5 \
  --out "$OUT-probes"
