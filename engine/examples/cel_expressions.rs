//! The engine's side of the CEL peer comparison in `bench/run.sh`: evaluates each expression of
//! an expressions file over each document of a JSON array, with `object` bound once per
//! document (not timed), and prints two lines per expression,
//! `<id> <evaluations> <nanoseconds per evaluation> <number of true results>`: evaluated as a
//! rule's condition is (in direct form where it has one), and, as `<id>~interpreter`, in the
//! CEL interpreter alone.
//!
//! `cargo run --release -p nvcre-engine --example cel_expressions -- EXPRS.json DOCS.json [ROUNDS]`

use std::process::ExitCode;

/// The allocator the CLI and the controller ship with: an evaluation allocates a view per
/// select, so the system allocator would measure another program.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
use std::time::Instant;

use nvcre_engine::{Expr, Scope};
use serde_json::Value;

fn read_json(path: &str) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    serde_json::from_str(&text).map_err(|e| format!("{path}: {e}"))
}

fn run(args: &[String]) -> Result<(), String> {
    let [exprs, docs, rest @ ..] = args else {
        return Err("usage: cel_expressions EXPRS.json DOCS.json [ROUNDS]".into());
    };
    let rounds: usize = rest.first().and_then(|r| r.parse().ok()).unwrap_or(5);
    let exprs = read_json(exprs)?;
    let docs = read_json(docs)?;
    let docs = docs.as_array().ok_or("documents: expected a JSON array")?;
    // One scope per document, its context built once (the first evaluation builds it).
    let bind_start = Instant::now();
    let scopes: Vec<Scope> = docs
        .iter()
        .map(|d| {
            let mut s = Scope::new();
            s.bind("object", d);
            s
        })
        .collect();
    let warm = Expr::compile("true").map_err(|e| e.to_string())?;
    for s in &scopes {
        let _ = warm.eval(s);
    }
    let bind_ns = bind_start.elapsed().as_nanos() as f64 / docs.len().max(1) as f64;
    println!("bind-object {} {bind_ns:.0} 0", docs.len());
    for e in exprs
        .as_array()
        .ok_or("expressions: expected a JSON array")?
    {
        let id = e.get("id").and_then(Value::as_str).unwrap_or("?");
        let text = e.get("expr").and_then(Value::as_str).unwrap_or("");
        let expr = Expr::compile(text).map_err(|err| format!("{id}: {err}"))?;
        // As a rule's condition is evaluated (in direct form where the expression has one),
        // then, on its own line, in the interpreter alone.
        let (trues, best) = time(&expr, &scopes, rounds);
        println!("{id} {} {best:.0} {trues}", scopes.len());
        nvcre_engine::set_direct_evaluation(false);
        let (trues, interpreted) = time(&expr, &scopes, rounds);
        nvcre_engine::set_direct_evaluation(true);
        println!("{id}~interpreter {} {interpreted:.0} {trues}", scopes.len());
    }
    Ok(())
}

/// The true results and the best time per evaluation (ns) of `rounds` rounds of `expr` over
/// every scope, evaluated as a rule's condition.
fn time(expr: &Expr, scopes: &[Scope], rounds: usize) -> (usize, f64) {
    let mut trues = 0usize;
    let mut best = f64::MAX;
    for _ in 0..rounds {
        trues = 0;
        let start = Instant::now();
        for s in scopes {
            if matches!(expr.eval_bool(s), Ok(true)) {
                trues += 1;
            }
        }
        best = best.min(start.elapsed().as_nanos() as f64 / scopes.len().max(1) as f64);
    }
    (trues, best)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cel_expressions: {e}");
            ExitCode::from(2)
        }
    }
}
