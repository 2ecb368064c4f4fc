//! Comparing what a case produced with what it wants, as readable lines: findings matched in
//! order with the fields that differ, JSON documents compared by path (subset or exact), the
//! error substring and the exit code.

use nvcre_engine::{FieldPath, Finding};
use serde_json::Value;

use super::{Case, CaseOutcome, Expectation, MessageMatch, WantFinding};
use crate::detect::quote;

pub(super) fn compare(case: &Case, got: &CaseOutcome) -> Vec<String> {
    let mut diff = Vec::new();
    match &case.expect {
        Expectation::Findings(want) => {
            // An error that stopped the case; a rule that could not be evaluated is a finding
            // (exit 2 without an error), compared with the others so that its message shows.
            match got.error.as_deref() {
                Some(error) if got.exit == 2 => {
                    diff.push("expected findings, but the case could not run:".into());
                    diff.push(format!("  error: {error}"));
                }
                _ => diff_findings(want, &got.findings, &mut diff),
            }
        }
        Expectation::Output { value, exact } => match &got.output {
            Some(output) => {
                let mut lines = Vec::new();
                diff_value(&FieldPath::root(), value, output, *exact, &mut lines);
                if !lines.is_empty() {
                    diff.push(format!(
                        "output differs ({}):",
                        if *exact {
                            "exact match"
                        } else {
                            "subset match"
                        }
                    ));
                    diff.extend(lines.into_iter().map(|l| format!("  {l}")));
                }
            }
            None => {
                diff.push("expected output, but the render failed:".into());
                diff.push(format!("  error: {}", got.error.as_deref().unwrap_or("")));
            }
        },
        Expectation::Error(want) => match &got.error {
            Some(e) if e.contains(want.as_str()) => {}
            Some(e) => {
                diff.push("error differs:".into());
                diff.push(format!("  expected to contain: {}", quote(want)));
                diff.push(format!("  actual:              {}", quote(e)));
            }
            None => {
                diff.push(format!(
                    "expected an error containing {}, but there was none (exit {})",
                    quote(want),
                    got.exit
                ));
                for f in &got.findings {
                    diff.push(format!("  finding: {}", finding_line(f)));
                }
            }
        },
        // The runner compares a property itself, variant by variant.
        Expectation::ExitOnly | Expectation::Property(_) => {}
    }
    if let Some(want) = case.want_exit
        && want != got.exit
    {
        diff.push(format!("exit code: expected {want}, got {}", got.exit));
        if let Some(e) = &got.error {
            diff.push(format!("  error: {e}"));
        }
    }
    diff
}

/// `{ruleId: …, severity: …, fieldPath: …, line: …, column: …, message: "…"}` of an actual
/// finding.
pub(super) fn finding_line(f: &Finding) -> String {
    let mut parts = vec![
        format!("ruleId: {}", f.rule_id),
        format!("severity: {}", f.severity),
    ];
    if let Some(p) = &f.field_path {
        parts.push(format!("fieldPath: {p}"));
    }
    if let Some(l) = f.line {
        parts.push(format!("line: {l}"));
    }
    if let Some(c) = f.column {
        parts.push(format!("column: {c}"));
    }
    parts.push(format!("message: {}", quote(&f.message)));
    format!("{{{}}}", parts.join(", "))
}

fn want_line(w: &WantFinding) -> String {
    let mut parts = vec![format!("ruleId: {}", w.rule_id)];
    if let Some(s) = w.severity {
        parts.push(format!("severity: {s}"));
    }
    if let Some(p) = &w.field_path {
        parts.push(format!("fieldPath: {p}"));
    }
    if let Some(l) = w.line {
        parts.push(format!("line: {l}"));
    }
    if let Some(c) = w.column {
        parts.push(format!("column: {c}"));
    }
    match &w.message {
        Some(MessageMatch::Exact(m)) => parts.push(format!("message: {}", quote(m))),
        Some(MessageMatch::Regex(r)) => parts.push(format!("messageRegex: {}", quote(r.as_str()))),
        None => {}
    }
    format!("{{{}}}", parts.join(", "))
}

/// The fields of `got` that differ from `want` (only the fields `want` gives).
fn finding_mismatches(want: &WantFinding, got: &Finding) -> Vec<&'static str> {
    let mut out = Vec::new();
    if want.rule_id != got.rule_id {
        out.push("ruleId");
    }
    if want.severity.is_some_and(|s| s != got.severity) {
        out.push("severity");
    }
    if want
        .message
        .as_ref()
        .is_some_and(|m| !m.matches(&got.message))
    {
        out.push("message");
    }
    if want
        .field_path
        .as_ref()
        .is_some_and(|p| got.field_path.as_deref() != Some(p.as_str()))
    {
        out.push("fieldPath");
    }
    if want.line.is_some_and(|l| got.line != Some(l)) {
        out.push("line");
    }
    if want.column.is_some_and(|c| got.column != Some(c)) {
        out.push("column");
    }
    out
}

/// The findings as a diff: the longest run of expected findings met in order (each `ok`),
/// and between two of them what was not met, an expected and an actual finding of the same
/// rule paired as one that `differs`, the others `missing` and `unexpected`. (Compared by
/// position alone, one extra finding made every finding after it look wrong.) Indexes are the
/// actual list's, and the expected list's for a missing finding.
fn diff_findings(want: &[WantFinding], got: &[Finding], diff: &mut Vec<String>) {
    let (n, m) = (want.len(), got.len());
    let same = |i: usize, j: usize| finding_mismatches(&want[i], &got[j]).is_empty();
    // lcs[i][j]: the longest in-order match of want[i..] and got[j..].
    let mut lcs = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if same(i, j) {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut lines = Vec::new();
    let mut bad = false;
    let (mut i, mut j) = (0, 0);
    // The unmatched findings since the last match: expected, actual.
    let mut gap: (Vec<usize>, Vec<usize>) = (Vec::new(), Vec::new());
    let flush = |gap: &mut (Vec<usize>, Vec<usize>), lines: &mut Vec<String>| {
        let (mut ws, mut gs) = (std::mem::take(&mut gap.0), std::mem::take(&mut gap.1));
        // Pair an expected finding with the first actual one of its rule.
        let mut pairs = Vec::new();
        ws.retain(
            |&w| match gs.iter().position(|&g| got[g].rule_id == want[w].rule_id) {
                Some(k) => {
                    pairs.push((w, gs.remove(k)));
                    false
                }
                None => true,
            },
        );
        for (w, g) in pairs {
            let fields = finding_mismatches(&want[w], &got[g]);
            lines.push(format!("  [{g}] differs in {}:", fields.join(", ")));
            lines.push(format!("      expected: {}", want_line(&want[w])));
            lines.push(format!("      actual:   {}", finding_line(&got[g])));
        }
        for w in ws {
            lines.push(format!("  [{w}] missing:"));
            lines.push(format!("      expected: {}", want_line(&want[w])));
        }
        for g in gs {
            lines.push(format!("  [{g}] unexpected:"));
            lines.push(format!("      actual:   {}", finding_line(&got[g])));
        }
    };
    while i < n || j < m {
        if i < n && j < m && same(i, j) && lcs[i][j] == lcs[i + 1][j + 1] + 1 {
            flush(&mut gap, &mut lines);
            lines.push(format!("  [{j}] ok: {}", got[j].rule_id));
            i += 1;
            j += 1;
        } else if j < m && (i == n || lcs[i][j + 1] >= lcs[i + 1][j]) {
            bad = true;
            gap.1.push(j);
            j += 1;
        } else {
            bad = true;
            gap.0.push(i);
            i += 1;
        }
    }
    flush(&mut gap, &mut lines);
    if bad {
        diff.push(format!("findings differ (expected {n}, got {m}):"));
        diff.extend(lines);
    }
}

/// A value on one line, cut after 160 characters.
fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 160 {
        let cut: String = s.chars().take(157).collect();
        format!("{cut}…")
    } else {
        s
    }
}

fn show_path(p: &FieldPath) -> String {
    if p.segments().is_empty() {
        "(document)".into()
    } else {
        p.to_string()
    }
}

/// Differences between `want` and `got` as `path: expected …, got …` lines. Without `exact`,
/// keys `got` has beyond `want` are ignored; lists always need the same length.
fn diff_value(at: &FieldPath, want: &Value, got: &Value, exact: bool, out: &mut Vec<String>) {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => {
            for (k, wv) in w {
                let child = at.clone().key(k.clone());
                match g.get(k) {
                    Some(gv) => diff_value(&child, wv, gv, exact, out),
                    None => out.push(format!(
                        "{}: missing (expected {})",
                        show_path(&child),
                        short(wv)
                    )),
                }
            }
            if exact {
                for (k, gv) in g {
                    if !w.contains_key(k) {
                        let child = at.clone().key(k.clone());
                        out.push(format!(
                            "{}: unexpected (got {})",
                            show_path(&child),
                            short(gv)
                        ));
                    }
                }
            }
        }
        (Value::Array(w), Value::Array(g)) => {
            if w.len() != g.len() {
                out.push(format!(
                    "{}: expected {} elements, got {}",
                    show_path(at),
                    w.len(),
                    g.len()
                ));
            }
            for (i, (wv, gv)) in w.iter().zip(g).enumerate() {
                diff_value(&at.clone().index(i), wv, gv, exact, out);
            }
        }
        _ if want != got => out.push(format!(
            "{}: expected {}, got {}",
            show_path(at),
            short(want),
            short(got)
        )),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(rule: &str, message: &str) -> Finding {
        Finding {
            rule_id: rule.into(),
            pack: "p".into(),
            severity: nvcre_engine::Severity::Error,
            message: message.into(),
            file: "f".into(),
            document: 0,
            object: None,
            field_path: None,
            line: None,
            column: None,
            rule_file: "r".into(),
            rule_line: 1,
            stage: None,
            rule_error: false,
            at_key: false,
        }
    }

    fn wanted(rule: &str, message: &str) -> WantFinding {
        WantFinding {
            rule_id: rule.into(),
            severity: None,
            message: Some(MessageMatch::Exact(message.into())),
            field_path: None,
            line: None,
            column: None,
        }
    }

    /// An extra finding ahead of the expected ones is one `unexpected` line: the expected
    /// findings after it are met, not each reported as differing from its neighbour.
    #[test]
    fn findings_are_diffed_by_the_longest_match_in_order() {
        let want = [wanted("a", "one"), wanted("b", "two"), wanted("c", "three")];
        let got = [
            found("x", "extra"),
            found("a", "one"),
            found("b", "TWO"),
            found("c", "three"),
        ];
        let mut out = Vec::new();
        diff_findings(&want, &got, &mut out);
        assert_eq!(
            out,
            [
                "findings differ (expected 3, got 4):",
                "  [0] unexpected:",
                "      actual:   {ruleId: x, severity: error, message: \"extra\"}",
                "  [1] ok: a",
                "  [2] differs in message:",
                "      expected: {ruleId: b, message: \"two\"}",
                "      actual:   {ruleId: b, severity: error, message: \"TWO\"}",
                "  [3] ok: c",
            ]
        );
        let mut out = Vec::new();
        diff_findings(&want, &got[1..2], &mut out);
        assert_eq!(
            out,
            [
                "findings differ (expected 3, got 1):",
                "  [0] ok: a",
                "  [1] missing:",
                "      expected: {ruleId: b, message: \"two\"}",
                "  [2] missing:",
                "      expected: {ruleId: c, message: \"three\"}",
            ]
        );
    }

    #[test]
    fn output_subset_and_exact_diffs_name_json_paths() {
        let mut out = Vec::new();
        let want = serde_json::json!({"a": {"b": 1, "c": [1, 2]}, "d": "x"});
        let got = serde_json::json!({"a": {"b": 2, "c": [1], "e": true}});
        diff_value(&FieldPath::root(), &want, &got, false, &mut out);
        assert_eq!(
            out,
            vec![
                "a.b: expected 1, got 2",
                "a.c: expected 2 elements, got 1",
                "d: missing (expected \"x\")"
            ]
        );
        out.clear();
        diff_value(
            &FieldPath::root(),
            &serde_json::json!({"a": {}}),
            &got,
            true,
            &mut out,
        );
        assert_eq!(
            out,
            vec![
                "a.b: unexpected (got 2)",
                "a.c: unexpected (got [1])",
                "a.e: unexpected (got true)"
            ]
        );
    }
}
