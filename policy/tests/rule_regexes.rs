//! Every regex the shipped rules write (a CEL `matches` / `find` / `findAll` pattern, a pattern
//! held in a CEL variable, a LogProfile `regex`, a `gpu-products` pattern) reads the same as Go
//! reads it as it did under the `regex` crate's own dialect: on ASCII text, where the two
//! dialects agree for these patterns, the Go translation matches and captures exactly what the
//! crate compiled from the pattern as written did.

use std::path::{Path, PathBuf};

use nvcre_engine::go_regex;
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::TestRunner;
use serde_json::Value;

fn rules_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../rules")
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("rules dir")
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            yaml_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "yaml") {
            out.push(p);
        }
    }
}

/// The CEL string literal at the start of `s` (after blanks), decoded.
fn cel_literal(s: &str) -> Option<String> {
    let s = s.trim_start();
    let (raw, s) = match s.strip_prefix(['r', 'R']) {
        Some(rest) if rest.starts_with(['\'', '"']) => (true, rest),
        _ => (false, s),
    };
    let quote = s.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    let mut out = String::new();
    let mut chars = s[1..].chars();
    while let Some(c) = chars.next() {
        match c {
            c if c == quote => return Some(out),
            '\\' if !raw => match chars.next()? {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                'r' => out.push('\r'),
                c @ ('\\' | '\'' | '"' | '`' | '?') => out.push(c),
                c => {
                    out.push('\\');
                    out.push(c);
                }
            },
            c => out.push(c),
        }
    }
    None
}

/// The regexes written in one string of a rule file: literal arguments of the regex
/// functions, `'pattern':` / `'re':` values of map literals, and an expression that is one
/// literal of a variable named as a pattern.
fn cel_patterns(text: &str, variable: Option<&str>, out: &mut Vec<String>) {
    for opener in [
        "matches(",
        ".find(",
        ".findAll(",
        "'pattern':",
        "'re':",
        "\"pattern\":",
        "\"re\":",
    ] {
        let mut from = 0;
        while let Some(i) = text[from..].find(opener) {
            let at = from + i + opener.len();
            if let Some(p) = cel_literal(&text[at..]) {
                out.push(p);
            }
            from = at;
        }
    }
    if variable.is_some_and(|v| v.to_lowercase().contains("pattern"))
        && let Some(p) = cel_literal(text)
    {
        out.push(p);
    }
}

fn walk(value: &Value, key: Option<&str>, variable: Option<&str>, out: &mut Vec<String>) {
    match value {
        Value::String(s) => {
            if matches!(key, Some("regex" | "pattern" | "match")) {
                out.push(s.clone());
            }
            cel_patterns(s, variable, out);
        }
        Value::Array(items) => {
            for v in items {
                walk(v, key, variable, out);
            }
        }
        Value::Object(map) => {
            let name = map.get("name").and_then(Value::as_str);
            for (k, v) in map {
                walk(v, Some(k), name.or(variable), out);
            }
        }
        _ => {}
    }
}

/// Every regex of the shipped rules (and their suites), deduplicated, and every LogProfile
/// `example`.
fn rule_regexes() -> (Vec<String>, Vec<String>) {
    let mut files = Vec::new();
    yaml_files(&rules_dir(), &mut files);
    let (mut patterns, mut examples) = (Vec::new(), Vec::new());
    for f in files {
        let text = std::fs::read_to_string(&f).expect("read");
        let source = nvcre_engine::Source::new(f.display().to_string(), text);
        let Ok(docs) = nvcre_engine::parse_documents(&source) else {
            continue;
        };
        for d in docs {
            walk(&d.value, None, None, &mut patterns);
            collect_examples(&d.value, &mut examples);
        }
    }
    patterns.sort();
    patterns.dedup();
    (patterns, examples)
}

fn collect_examples(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("example", Value::String(s)) => out.push(s.clone()),
                    _ => collect_examples(v, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_examples(v, out)),
        _ => {}
    }
}

/// Printable ASCII and tab: where Go's classes and the crate's agree (the crate's `\s` also
/// takes `\v`, Go's does not).
fn comparable(s: &str) -> bool {
    s.chars().all(|c| c == '\t' || (' '..='~').contains(&c))
}

fn samples(pattern: &str, fixed: &[String]) -> Vec<String> {
    let mut out: Vec<String> = fixed.to_vec();
    if let Ok(strategy) = proptest::string::string_regex(pattern) {
        let mut runner = TestRunner::deterministic();
        for _ in 0..40 {
            if let Ok(tree) = strategy.new_tree(&mut runner) {
                out.push(tree.current());
            }
        }
    }
    out.retain(|s| comparable(s));
    out
}

type Spans = Vec<Option<(usize, usize)>>;

fn spans_str(re: &regex::Regex, text: &str) -> Option<Spans> {
    re.captures(text)
        .map(|c| c.iter().map(|m| m.map(|m| (m.start(), m.end()))).collect())
}

fn spans_bytes(re: &regex::bytes::Regex, text: &[u8]) -> Option<Spans> {
    re.captures(text)
        .map(|c| c.iter().map(|m| m.map(|m| (m.start(), m.end()))).collect())
}

#[test]
fn every_rule_regex_reads_alike_in_gos_dialect() {
    let (patterns, examples) = rule_regexes();
    let mut fixed: Vec<String> = [
        "",
        "a",
        "abc",
        "ABC",
        "a-b.c",
        "my-app",
        "-bad-",
        "x.y.z",
        "nvcre.nvidia.com/queue",
        "example.com/a_b.c",
        "Foo/bar",
        "torchrun --nproc_per_node 8",
        "sh -c 'torchrun x'",
        "/usr/bin/mpirun -np 2 python",
        "mpirun.hydra ",
        "1.5Gi",
        "500Mi",
        "10",
        "-1",
        "+3",
        "0",
        "1e3",
        ".5",
        "1h30m",
        "90s",
        "-0",
        "NVIDIA-H100-80GB-HBM3",
        "NVIDIA A100-SXM4-80GB",
        "NVIDIA-RTX-PRO-6000-Blackwell",
        " x ",
        "eth0,eth1",
        "^=eth0",
        "=mlx5_0:1",
        "'q'",
        "\"q\"",
        "config.kubeflow.org",
        "kueue.x-k8s.io",
    ]
    .iter()
    .map(ToString::to_string)
    .collect();
    fixed.extend(examples);
    let mut checked = 0;
    let mut problems = Vec::new();
    for p in &patterns {
        let Ok(old) = regex::Regex::new(p) else {
            // Not a regex (a fragment of a concatenation) or a suite's deliberately broken one.
            continue;
        };
        let new = match go_regex::compile(p) {
            Ok(re) => re,
            Err(e) => {
                problems.push(format!("{p:?}: {e}"));
                continue;
            }
        };
        let old_bytes = regex::bytes::RegexBuilder::new(p)
            .unicode(false)
            .build()
            .ok();
        let new_bytes = go_regex::compile_bytes(p).expect("compiles as str");
        checked += 1;
        for s in samples(p, &fixed) {
            if spans_str(&old, &s) != spans_str(&new, &s) {
                problems.push(format!(
                    "{p:?} on {s:?}: {:?} before, {:?} now",
                    spans_str(&old, &s),
                    spans_str(&new, &s)
                ));
            }
            if let Some(old_bytes) = &old_bytes {
                let line = go_regex::go_utf8(s.as_bytes());
                if spans_bytes(old_bytes, s.as_bytes()) != spans_bytes(&new_bytes, &line) {
                    problems.push(format!("{p:?} on bytes {s:?} differs"));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // The shipped rules hold a few dozen patterns; fewer means the extraction broke.
    assert!(
        checked >= 30,
        "only {checked} patterns found: {patterns:#?}"
    );
}
