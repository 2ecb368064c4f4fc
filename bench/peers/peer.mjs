// cel-js side of the CEL peer comparison (see bench/run.sh): one engine per run, named by its
// npm package. Evaluates each expression over each document (`object` bound once per document,
// not timed; best of ROUNDS) and prints `<id> <evaluations> <ns per evaluation> <true results>`.
// Usage: node peer.mjs PACKAGE EXPRS.json DOCS.json [ROUNDS]
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

const [pkg, exprsPath, docsPath, roundsArg] = process.argv.slice(2);
const exprs = JSON.parse(readFileSync(exprsPath, 'utf8'));
const docs = JSON.parse(readFileSync(docsPath, 'utf8'));
const rounds = Number(roundsArg ?? 5);
const require = createRequire(pathToFileURL(process.cwd() + '/'));
const lib = await import(pathToFileURL(require.resolve(pkg)).href);

// Both packages export `parse`: @marcbachmann/cel-js returns a function of the context,
// cel-js (ChromeGG) a parse result whose `cst` goes to `evaluate`.
function compile(text) {
  const parsed = lib.parse(text);
  if (typeof parsed === 'function') return (ctx) => parsed(ctx);
  if (parsed && parsed.isSuccess) return (ctx) => lib.evaluate(parsed.cst, ctx);
  throw new Error(`${text}: does not parse`);
}

const contexts = docs.map((d) => ({ object: d }));
for (const e of exprs) {
  const run = compile(e.expr);
  let best = Infinity;
  let trues = 0;
  for (let r = 0; r < rounds; r++) {
    trues = 0;
    const start = process.hrtime.bigint();
    for (const c of contexts) {
      let v;
      try {
        v = run(c);
      } catch {
        continue;
      }
      if (v === true) trues++;
    }
    const ns = Number(process.hrtime.bigint() - start) / contexts.length;
    best = Math.min(best, ns);
  }
  console.log(`${e.id} ${contexts.length} ${best.toFixed(0)} ${trues}`);
}
