#!/usr/bin/env bash
# Regenerates the committed artifact of every example (generated/<name>/). Refuses, like
# `repro scaffold`, to overwrite a file someone edited by hand.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
for spec in examples/*.yaml; do
  target/release/repro scaffold "$spec" >/dev/null
done
echo "regenerated: $(ls generated | tr '\n' ' ')"
