#!/usr/bin/env bash
set -euo pipefail
OUT=${OUT:-dist}
mkdir -p "$OUT"
for f in src/*.md; do
  pandoc "$f" -o "$OUT/$(basename "${f%.md}").html"
done
echo "built $(ls "$OUT" | wc -l) pages"
