"""cel-python side of the CEL peer comparison (see bench/run.sh).

Evaluates each expression over each document with `object` bound once per document (not timed)
and prints `<id> <evaluations> <nanoseconds per evaluation> <number of true results>`.
Usage: python peer.py EXPRS.json DOCS.json [MAX_DOCS]
"""
import json
import sys
import time

import celpy
from celpy import celtypes


def main():
    exprs = json.load(open(sys.argv[1]))
    docs = json.load(open(sys.argv[2]))
    if len(sys.argv) > 3:
        docs = docs[: int(sys.argv[3])]
    env = celpy.Environment()
    acts = [{"object": celpy.json_to_cel(d)} for d in docs]
    for e in exprs:
        prog = env.program(env.compile(e["expr"]))
        trues = 0
        start = time.perf_counter_ns()
        for a in acts:
            try:
                r = prog.evaluate(a)
            except Exception:  # an evaluation error counts as not true, as in the others
                continue
            if isinstance(r, celtypes.BoolType) and bool(r):
                trues += 1
        ns = (time.perf_counter_ns() - start) / max(len(acts), 1)
        print(f"{e['id']} {len(acts)} {ns:.0f} {trues}", flush=True)


main()
