#!/usr/bin/env bash
# Bounded-memory measurements (opt-in; not timed tests): peak RSS and wall time, from
# /usr/bin/time -v, of the inputs whose size must not decide the memory used. See BENCHMARKS.md.
#
#   bench/memory.sh            (or MEMORY=1 bench/run.sh)
#
# Measurements (one run each, release build):
#   check-stream-mixed     `check -o json -` of a BIG_MB MB stream on stdin: the corpus of
#                          cli/examples/bench_corpus.rs (DOCS documents, seed SEED) repeated
#   check-stream-clean     `check -o json -` of a BIG_MB MB stream of one ConfigMap repeated (no
#                          findings: what streaming alone costs)
#   render-nodes-file      `render --nodes-file` of a NODES-node real-shaped nodes file
#                          (bench/real_nodes.py) and examples/nccl-all-reduce.yaml
#   render-nodes-expand    the same with `--expand` (numNodes 4: NODES/4 groups)
#
# Environment: BIG_MB (default 200), DOCS (default 3000), SEED (default 1), NODES (default 5000),
# BENCH_DIR (where the corpus and the nodes file go; default a fresh temporary directory),
# SKIP_STREAM=1 / SKIP_NODES=1 leave a group out.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIG_MB=${BIG_MB:-200}
DOCS=${DOCS:-3000}
SEED=${SEED:-1}
NODES=${NODES:-5000}
WORK=${BENCH_DIR:-$(mktemp -d /tmp/nvcre-memory.XXXXXX)}
mkdir -p "$WORK"

[ -x /usr/bin/time ] || { echo "bench: /usr/bin/time is required (apt-get install time)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "bench: python3 is required (bench/real_nodes.py)" >&2; exit 2; }

echo "# nvcre-policy memory benchmark: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $(git -C "$ROOT" rev-parse --short HEAD)"
# The binary alone last, as `cargo build` gives it, with PROFILE (default dist; see run.sh).
PROFILE=${PROFILE:-dist}
(cd "$ROOT" && cargo build --quiet --release -p nvcre-policy --example bench_corpus &&
  cargo build --quiet --profile "$PROFILE" -p nvcre-policy --bin nvcre-policy)
REL="$ROOT/target/release"
BIN="$ROOT/target/$PROFILE/nvcre-policy"

# name, then the command; its stdin is this function's. Prints peak RSS, wall time, exit code.
measure() {
  local name=$1; shift
  /usr/bin/time -v "$@" >/dev/null 2>"$WORK/time.txt" || true
  local kb wall status
  kb=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$WORK/time.txt")
  wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$WORK/time.txt")
  status=$(sed -n 's/.*Exit status: //p' "$WORK/time.txt")
  printf '%-24s %9.1f MB peak RSS %12s wall   exit %s   %s\n' "$name" \
    "$(awk -v k="$kb" 'BEGIN{print k/1024}')" "$wall" "$status" "${NOTE:-}"
}

# Writes `copies` copies of file $1 (each followed by `---`) to stdout.
repeat() {
  local file=$1 copies=$2
  for _ in $(seq "$copies"); do cat "$file"; printf -- '---\n'; done
}

if [ -z "${SKIP_STREAM:-}" ]; then
  "$REL/examples/bench_corpus" "$WORK/corpus" "$DOCS" "$SEED" | sed 's/^/# corpus: /'
  MIXED="$WORK/corpus/mixed.yaml"
  SIZE=$(stat -c %s "$MIXED")
  COPIES=$(( (BIG_MB * 1024 * 1024 + SIZE - 1) / SIZE ))
  NOTE="$(( SIZE * COPIES / 1024 / 1024 )) MB, $(( DOCS * COPIES )) documents ($COPIES copies of mixed.yaml)"
  repeat "$MIXED" "$COPIES" | measure check-stream-mixed "$BIN" check -o json -
  printf 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  labels: {app: bench}\ndata:\n  a: "%s"\n' \
    "$(head -c 900 /dev/zero | tr '\0' x)" > "$WORK/configmap.yaml"
  SIZE=$(( $(stat -c %s "$WORK/configmap.yaml") + 4 ))
  COPIES=$(( BIG_MB * 1024 * 1024 / SIZE ))
  NOTE="$(( SIZE * COPIES / 1024 / 1024 )) MB, $COPIES documents"
  # Written once to a file (standard input is read the same way from a file or a pipe).
  python3 -c 'import sys; d = open(sys.argv[1]).read() + "---\n"; sys.stdout.writelines(d for _ in range(int(sys.argv[2])))' \
    "$WORK/configmap.yaml" "$COPIES" > "$WORK/clean.yaml"
  measure check-stream-clean "$BIN" check -o json - < "$WORK/clean.yaml"
  rm -f "$WORK/clean.yaml"
fi

if [ -z "${SKIP_NODES:-}" ]; then
  python3 "$ROOT/bench/real_nodes.py" "$NODES" > "$WORK/nodes.yaml"
  NOTE="$NODES nodes, $(( $(stat -c %s "$WORK/nodes.yaml") / 1024 / 1024 )) MB"
  measure render-nodes-file "$BIN" render --nodes-file "$WORK/nodes.yaml" "$ROOT/examples/nccl-all-reduce.yaml"
  measure render-nodes-expand "$BIN" render --nodes-file "$WORK/nodes.yaml" --expand "$ROOT/examples/nccl-all-reduce.yaml"
fi
