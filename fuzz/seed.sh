#!/bin/sh
# Creates the seed corpora of the fuzz targets from the repository's examples/ and rules/
# (fuzz/corpus/<target>/; existing entries are kept). Run from anywhere.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
corpus="$root/fuzz/corpus"
mkdir -p "$corpus/parse_workloadrun" "$corpus/load_rules" "$corpus/check_pipeline" "$corpus/render"

# parse_workloadrun: every example manifest and node set, and the regression inputs.
for f in "$root"/examples/*.yaml "$root"/examples/nodes/*.yaml "$root"/fuzz/inputs/*.yaml; do
  cp "$f" "$corpus/parse_workloadrun/$(basename "$f")"
done

# load_rules: every rule file (packs and tables).
find "$root/rules" -path "$root/rules/tests" -prune -o -name '*.yaml' -print | while read -r f; do
  rel=${f#"$root/rules/"}
  cp "$f" "$corpus/load_rules/$(echo "$rel" | tr / _)"
done

# check_pipeline: the first byte chooses the node context (0: none, 1: --platform/--gpu-arch,
# 2 and 3: --nodes-file); each example once per context.
for f in "$root"/examples/*.yaml "$root"/fuzz/inputs/documents.yaml; do
  b=$(basename "$f" .yaml)
  for mode in 0 1 2 3; do
    { printf "\\$(printf '%03o' "$mode")"; cat "$f"; } > "$corpus/check_pipeline/$b-$mode"
  done
done

# render: the input is `arbitrary` data, not text; libFuzzer starts from an empty corpus.
echo "seeded $(ls "$corpus"/* | wc -l) files under $corpus"
