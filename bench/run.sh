#!/usr/bin/env bash
# The reproducible benchmark (see BENCHMARKS.md). One command:
#
#   bench/run.sh [DOCS]        # DOCS: documents in the mixed corpus (default 10000)
#
# Environment: SEED (corpus seed, default 1), RUNS (hyperfine runs per measurement, default 3),
# BENCH_DIR (where the corpus and the peers' installs go; default a fresh temporary directory),
# BIG_MB (size of the stream of the peak-RSS stream measurement, default 200; 0 skips it),
# PROFILE (the cargo profile of the binary and the parse floor, default dist),
# REUSE_CORPUS=1 keeps the corpus already in BENCH_DIR, PEERS=0 skips the CEL peers, BASELINE=/path/to/an/older/nvcre-policy adds the same `check` and
# one-file measurements with that binary, each with its ratio to this tree's (before/after in
# one run).
#
# Prints one line per measurement; every ratio is computed from figures of this one run.
# MEMORY=1 runs the bounded-memory measurements instead (bench/memory.sh: peak RSS and wall time
# of a 200 MB `check -` stream and of a 5,000-node `render --nodes-file`, with and without
# `--expand`).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [ "${MEMORY:-0}" = 1 ]; then
  exec "$ROOT/bench/memory.sh"
fi
DOCS=${1:-10000}
SEED=${SEED:-1}
RUNS=${RUNS:-3}
BIG_MB=${BIG_MB:-200}
PEERS=${PEERS:-1}
BASELINE=${BASELINE:-}
PROFILE=${PROFILE:-dist}
WORK=${BENCH_DIR:-$(mktemp -d /tmp/nvcre-bench.XXXXXX)}
mkdir -p "$WORK"

need() { command -v "$1" >/dev/null || { echo "bench: $1 is required ($2)" >&2; exit 2; }; }
need hyperfine "apt-get install hyperfine"
need python3 "for the result arithmetic and the cel-python peer"
[ -x /usr/bin/time ] || { echo "bench: /usr/bin/time is required (apt-get install time)" >&2; exit 2; }

echo "# nvcre-policy benchmark: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $(git -C "$ROOT" rev-parse --short HEAD)"
echo "# corpus: $DOCS documents, seed $SEED, in $WORK; binary and floor built with --profile $PROFILE"
# The examples first, the binary alone last: built together with the examples, the binary
# would get the features the dev-dependencies enable (a regex build that compiles full DFAs,
# about 15 M more instructions at start-up), which `cargo build`/`cargo install` do not give it.
# The binary and the floor are built with PROFILE (default `dist`, the shipped binary: LTO in
# one codegen unit, so the first build takes several minutes longer); the corpus generator and
# the CEL expressions with `release`.
(cd "$ROOT" && cargo build --quiet --release -p nvcre-policy --example bench_corpus &&
  cargo build --quiet --profile "$PROFILE" -p nvcre-engine --example parse_floor &&
  cargo build --quiet --release -p nvcre-engine --example cel_expressions &&
  cargo build --quiet --profile "$PROFILE" -p nvcre-policy --bin nvcre-policy)
REL="$ROOT/target/release"
OUT="$ROOT/target/$PROFILE"
BIN="$OUT/nvcre-policy"
if [ -z "${REUSE_CORPUS:-}" ]; then
  "$REL/examples/bench_corpus" "$WORK" "$DOCS" "$SEED" | sed 's/^/# corpus: /'
else
  echo "# corpus: reused from $WORK (REUSE_CORPUS set)"
fi
C="$WORK"
WR_DOCS=$(grep -c '^kind: WorkloadRun' "$C/workloadruns.yaml")
RENDER_DOCS=$(grep -c '^kind: WorkloadRun' "$C/renderable.yaml")

# mean seconds of one hyperfine measurement; check exits 1 on findings, so failures are allowed.
mean() {
  local json="$WORK/h.json" warmup=1
  # The corpus was just written, so it is in the page cache; long runs need no warm-up run.
  [ "$1" -lt 5 ] && warmup=0
  hyperfine --style none --runs "$1" --warmup "$warmup" -i --export-json "$json" "$2" >/dev/null 2>&1
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["results"][0]["mean"])' "$json"
}
declare -A T
line() { # name seconds docs [floor-name]
  python3 - "$@" <<'EOF'
import sys
name, secs, docs = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
out = f"{name:<44} {secs*1000:10.1f} ms"
if docs > 1:
    out += f" {docs/secs:10.0f} docs/s"
if len(sys.argv) > 5:
    out += f"   {secs/float(sys.argv[5]):6.2f}x {sys.argv[4]}"
print(out)
EOF
}
run() { # key runs docs command [floor-key]
  local key=$1 runs=$2 docs=$3 cmd=$4 floor=${5:-}
  T[$key]=$(mean "$runs" "$cmd")
  if [ -n "$floor" ]; then line "$key" "${T[$key]}" "$docs" "$floor" "${T[$floor]}"; else line "$key" "${T[$key]}" "$docs"; fi
}

echo "## throughput (mean of $RUNS runs)"
run floor-mixed-file "$RUNS" "$DOCS" "$OUT/examples/parse_floor $C/mixed.yaml"
run floor-mixed-dir "$RUNS" "$DOCS" "$OUT/examples/parse_floor $C/mixed"
run floor-workloadruns "$RUNS" "$WR_DOCS" "$OUT/examples/parse_floor $C/workloadruns.yaml"
run check-mixed-file "$RUNS" "$DOCS" "$BIN check -o json $C/mixed.yaml" floor-mixed-file
run check-mixed-dir "$RUNS" "$DOCS" "$BIN check -o json $C/mixed" floor-mixed-dir
run check-mixed-file-text "$RUNS" "$DOCS" "$BIN check --no-color $C/mixed.yaml" floor-mixed-file
run check-workloadruns "$RUNS" "$WR_DOCS" "$BIN check -o json $C/workloadruns.yaml" floor-workloadruns
run check-platform-aws-mixed-file "$RUNS" "$DOCS" "$BIN check -o json --platform aws $C/mixed.yaml" floor-mixed-file
# The file and directory forms do the same work only while the file is within the bounds of
# `objects` (2,048 documents, 8 MiB): past them, the rules that read `objects` report an error
# on its TrainJobs and TrainingRuntimes instead of evaluating, as the directory (one document
# per input) still does. And a TrainJob finds its TrainingRuntime in the file, not in the
# directory (another input), so their rules differ too. The forms are compared on the corpus's
# first 2,000 documents that are not TrainJobs, whose findings must then agree.
BOUNDED=0
rm -rf "$C/bounded" && mkdir "$C/bounded"
for f in "$C"/mixed/*.yaml; do
  if grep -q '^kind: TrainJob$' "$f"; then continue; fi
  ln "$f" "$C/bounded/"; printf -- '---\n'; cat "$f"
  BOUNDED=$((BOUNDED + 1))
  if [ "$BOUNDED" -ge 2000 ]; then break; fi
done > "$C/bounded.yaml"
summary() { "$BIN" check -o json "$1" 2>/dev/null | python3 -c 'import json,sys; s=json.load(sys.stdin)["summary"]; print(s["errors"], s["warnings"], s["info"], s["inputErrors"])'; }
[ "$(summary "$C/bounded.yaml")" = "$(summary "$C/bounded")" ] ||
  echo "# bounded: the file's and the directory's findings differ ($(summary "$C/bounded.yaml") / $(summary "$C/bounded"))"
run check-bounded-file "$RUNS" "$BOUNDED" "$BIN check -o json $C/bounded.yaml"
run check-bounded-dir "$RUNS" "$BOUNDED" "$BIN check -o json $C/bounded" check-bounded-file
run render-renderable "$RUNS" "$RENDER_DOCS" "$BIN render --platform aws --gpu-arch h100 $C/renderable.yaml"
python3 -c "import sys; print(f'{\"render-per-workloadrun\":<44} {float(sys.argv[1])*1000/int(sys.argv[2]):10.3f} ms')" \
  "${T[render-renderable]}" "$RENDER_DOCS"
if [ -n "$BASELINE" ]; then
  echo "## baseline $BASELINE (ratio: baseline time / this tree's)"
  base() { # key runs docs command-args...
    local key=$1 runs=$2 docs=$3; shift 3
    local secs; secs=$(mean "$runs" "$BASELINE $*")
    line "baseline-$key" "$secs" "$docs" "$key" "${T[$key]}"
  }
  base check-mixed-file "$RUNS" "$DOCS" check -o json "$C/mixed.yaml"
  base check-mixed-dir "$RUNS" "$DOCS" check -o json "$C/mixed"
  base check-mixed-file-text "$RUNS" "$DOCS" check --no-color "$C/mixed.yaml"
  base check-workloadruns "$RUNS" "$WR_DOCS" check -o json "$C/workloadruns.yaml"
  base check-platform-aws-mixed-file "$RUNS" "$DOCS" check -o json --platform aws "$C/mixed.yaml"
  base render-renderable "$RUNS" "$RENDER_DOCS" render --platform aws --gpu-arch h100 "$C/renderable.yaml"
fi

echo "## one file end to end (cold start, mean of 20 runs)"
run cli-version 20 1 "$BIN --version"
run render-one-file 20 1 "$BIN render --platform aws --gpu-arch h100 $C/single.yaml"
run check-one-file 20 1 "$BIN check $C/single.yaml"
if [ -n "$BASELINE" ]; then
  for k in render-one-file check-one-file; do
    case $k in
      render-one-file) secs=$(mean 20 "$BASELINE render --platform aws --gpu-arch h100 $C/single.yaml") ;;
      check-one-file) secs=$(mean 20 "$BASELINE check $C/single.yaml") ;;
    esac
    line "baseline-$k" "$secs" 1 "$k" "${T[$k]}"
  done
fi

echo "## peak RSS"
rss() { # name command...
  local name=$1; shift
  /usr/bin/time -v "$@" >/dev/null 2>"$WORK/time.txt" || true
  local kb; kb=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$WORK/time.txt")
  local status; status=$(sed -n 's/.*Exit status: //p' "$WORK/time.txt")
  printf '%-44s %10.1f MB   exit %s\n' "$name" "$(awk -v k="$kb" 'BEGIN{print k/1024}')" "$status"
}
rss rss-floor-mixed-file "$OUT/examples/parse_floor" "$C/mixed.yaml"
rss rss-check-mixed-file "$BIN" check -o json "$C/mixed.yaml"
rss rss-check-mixed-dir "$BIN" check -o json "$C/mixed"
if [ -n "$BASELINE" ]; then
  rss rss-baseline-check-mixed-file "$BASELINE" check -o json "$C/mixed.yaml"
  rss rss-baseline-check-mixed-dir "$BASELINE" check -o json "$C/mixed"
fi
if [ "$BIG_MB" -gt 0 ]; then
  SIZE=$(stat -c %s "$C/mixed.yaml")
  COPIES=$(( (BIG_MB * 1024 * 1024 + SIZE - 1) / SIZE ))
  big() { for _ in $(seq "$COPIES"); do cat "$C/mixed.yaml"; printf -- '---\n'; done; }
  big | /usr/bin/time -v "$BIN" check -o json - >/dev/null 2>"$WORK/time.txt" || true
  kb=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$WORK/time.txt")
  wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$WORK/time.txt")
  status=$(sed -n 's/.*Exit status: //p' "$WORK/time.txt")
  printf '%-44s %10.1f MB   exit %s, %s wall, %d MB in %d copies\n' "rss-check-stream-stdin" \
    "$(awk -v k="$kb" 'BEGIN{print k/1024}')" "$status" "$wall" "$(( SIZE * COPIES / 1024 / 1024 ))" "$COPIES"
fi

if [ "$PEERS" = 1 ]; then
  echo "## CEL peers: ns per evaluation, object bound once per document (ratio = peer / ours)"
  EXPRS="$ROOT/bench/peers/expressions.json"
  "$REL/examples/cel_expressions" "$EXPRS" "$C/peers-docs.json" > "$WORK/ours.txt"
  : > "$WORK/python.txt"; : > "$WORK/marcbachmann.txt"; : > "$WORK/celjs.txt"
  if [ -x "$WORK/venv/bin/python" ] || python3 -m venv "$WORK/venv" >/dev/null 2>&1; then
    if "$WORK/venv/bin/pip" install --quiet cel-python >/dev/null 2>&1; then
      "$WORK/venv/bin/python" "$ROOT/bench/peers/peer.py" "$EXPRS" "$C/peers-docs.json" 200 > "$WORK/python.txt" ||
        echo "# cel-python failed; skipped"
    else echo "# cel-python: PyPI not reachable (pip install failed); skipped"; fi
  else echo "# cel-python: python3 -m venv failed; skipped"; fi
  if command -v npm >/dev/null && command -v node >/dev/null; then
    mkdir -p "$WORK/npm"
    if (cd "$WORK/npm" && npm install --silent --no-audit --no-fund @marcbachmann/cel-js cel-js >/dev/null 2>&1); then
      (cd "$WORK/npm" && node "$ROOT/bench/peers/peer.mjs" @marcbachmann/cel-js "$EXPRS" "$C/peers-docs.json" > "$WORK/marcbachmann.txt") ||
        echo "# @marcbachmann/cel-js failed; skipped"
      (cd "$WORK/npm" && node "$ROOT/bench/peers/peer.mjs" cel-js "$EXPRS" "$C/peers-docs.json" > "$WORK/celjs.txt") ||
        echo "# cel-js failed; skipped"
    else echo "# cel-js: the npm registry is not reachable (npm install failed); skipped"; fi
  else echo "# cel-js: node/npm not installed; skipped"; fi
  python3 - "$WORK/ours.txt" "$WORK/python.txt" "$WORK/marcbachmann.txt" "$WORK/celjs.txt" <<'EOF'
import sys
def load(p):
    out = {}
    for l in open(p):
        f = l.split()
        if len(f) == 4:
            out[f[0]] = (int(f[1]), float(f[2]), int(f[3]))
    return out
ours, py, mb, cj = (load(p) for p in sys.argv[1:])
b = ours.pop("bind-object", None)
if b:
    print(f"{'cel-bind-object (ours, once per document)':<44} {b[1]:10.0f} ns")
print(f"{'expression':<20} {'ours':>8} {'cel-python':>12} {'x':>7} {'@marcbachmann/cel-js':>21} {'x':>6} {'cel-js':>8} {'x':>6}  true/evaluated: ours py mb cj")
for k, (n, ns, t) in ours.items():
    def col(d, w):
        if k not in d: return f"{'-':>{w}} {'-':>6}"
        return f"{d[k][1]:{w}.0f} {d[k][1]/ns:6.1f}"
    trues = " ".join(f"{d[k][2]}/{d[k][0]}" if k in d else "-" for d in (ours, py, mb, cj))
    print(f"cel-{k:<16} {ns:8.0f} {col(py, 12)} {col(mb, 21)} {col(cj, 8)}  {trues}")
EOF
fi
