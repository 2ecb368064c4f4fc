//! Lints for rule files: the loader's problems, all of them rather than the first, plus mistakes
//! that load fine but cannot be what the author meant.
//!
//! [`lint`] reports, each with a [`Lint`] id, the file, line and column:
//!
//! - `yaml`, `unknown-field`, `invalid`, `compile`, `duplicate-id`: what the loader refuses
//!   ([`RuleSet::from_sources`] stops at the first; the lint goes on past a bad rule or document);
//! - `message-looks-like-cel`: a fixed `message` that reads like CEL (`object.`, `variables.`,
//!   `params.`, `+ '`, `size(`, …), which is printed as written; `messageExpression` computes;
//! - `unused-variable`: a pack or rule variable that no expression or template refers to
//!   (`variables.<name>` as a word, or `variables['<name>']`);
//! - `unused-fragment`: a fragment that nothing inserts (`{$fragment: name}`) or reads
//!   (`fragments.<name>`);
//! - `escaped-key-on-map`: a key escaped with `__dot__` / `__slash__` / `__dash__` selected from
//!   `labels` or `annotations`. Escaping applies to schema fields only; the keys of these
//!   free-form maps are never unescaped, so the selection never matches. `['key']` does.
//!
//! The lint only reads text: it knows the rule-file format, not any particular policy.

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use crate::error::Error;
use crate::finding::Severity;
use crate::pack::{ProblemKind, RuleSet};
use crate::path::FieldPath;
use crate::source::{Document, Pos, Source, parse_documents};

/// What a [`LintFinding`] is about. [`Lint::id`] is the name shown in brackets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Lint {
    /// `yaml`: the file is not YAML (or is too large).
    Yaml,
    /// `unknown-field`: a field that is not part of the rule-file format.
    UnknownField,
    /// `invalid`: any other shape problem (missing field, wrong type, wrong apiVersion, …).
    Invalid,
    /// `compile`: a CEL expression, template or field path that does not compile.
    Compile,
    /// `duplicate-id`: a rule id, entry id, pack or table name used twice.
    DuplicateId,
    /// `message-looks-like-cel`: a fixed `message` that reads like a CEL expression.
    MessageLooksLikeCel,
    /// `unused-variable`: a pack or rule variable nothing refers to.
    UnusedVariable,
    /// `unused-fragment`: a fragment nothing inserts or reads.
    UnusedFragment,
    /// `escaped-key-on-map`: `labels.a__dot__b` and the like, which never match.
    EscapedKeyOnMap,
    /// `undefined-variable`: `variables.x` where no variable `x` is visible (a typo fails
    /// every evaluation).
    UndefinedVariable,
}

impl Lint {
    /// The lint's id, as shown in `severity[id]`.
    pub fn id(self) -> &'static str {
        match self {
            Lint::Yaml => "yaml",
            Lint::UnknownField => "unknown-field",
            Lint::Invalid => "invalid",
            Lint::Compile => "compile",
            Lint::DuplicateId => "duplicate-id",
            Lint::MessageLooksLikeCel => "message-looks-like-cel",
            Lint::UnusedVariable => "unused-variable",
            Lint::UnusedFragment => "unused-fragment",
            Lint::EscapedKeyOnMap => "escaped-key-on-map",
            Lint::UndefinedVariable => "undefined-variable",
        }
    }

    /// How serious the lint is: everything the loader refuses and `escaped-key-on-map` (a
    /// selection that can never match) are errors; the rest are warnings.
    pub fn severity(self) -> Severity {
        match self {
            Lint::MessageLooksLikeCel | Lint::UnusedVariable | Lint::UnusedFragment => {
                Severity::Warning
            }
            _ => Severity::Error,
        }
    }
}

impl fmt::Display for Lint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// One lint result. `Display` gives `file:line:col: severity[id]: rule R: message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LintFinding {
    /// Which lint.
    pub lint: Lint,
    /// Its severity ([`Lint::severity`]).
    pub severity: Severity,
    /// The rule file.
    pub file: String,
    /// Line and column, when known.
    pub pos: Option<Pos>,
    /// The rule (or table entry) id, when the problem is inside one.
    pub rule: Option<String>,
    /// What is wrong, and what to do.
    pub message: String,
}

impl fmt::Display for LintFinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.pos {
            Some(p) => write!(f, "{}:{p}: ", self.file)?,
            None => write!(f, "{}: ", self.file)?,
        }
        write!(f, "{}[{}]: ", self.severity, self.lint)?;
        if let Some(r) = &self.rule {
            write!(f, "rule {r}: ")?;
        }
        f.write_str(&self.message)
    }
}

/// Lints rule files (the sources a [`RuleSet`] would load). Findings come in source order, then
/// line and column order.
///
/// ```
/// use nvcre_engine::{Lint, Source, lint};
///
/// let pack = Source::new("rules/p.yaml", "\
/// apiVersion: policy.nvcre.nvidia.com/v1alpha1
/// kind: RulePack
/// metadata: {name: p}
/// variables:
///   - {name: unused, expression: object.spec}
/// rules:
///   - id: r
///     validate: {expression: 'true', message: \"'x' + object.a\"}
/// ");
/// let findings = lint(&[pack]);
/// let ids: Vec<Lint> = findings.iter().map(|f| f.lint).collect();
/// assert_eq!(ids, [Lint::UnusedVariable, Lint::MessageLooksLikeCel]);
/// assert_eq!(
///     findings[0].to_string(),
///     "rules/p.yaml:5:12: warning[unused-variable]: pack variable \"unused\" is never used: \
///      no expression or template of pack p refers to variables.unused"
/// );
/// ```
pub fn lint(sources: &[Arc<Source>]) -> Vec<LintFinding> {
    let (_, problems) = RuleSet::load_collecting(sources);
    let mut out: Vec<(usize, LintFinding)> = Vec::new();
    let order = |file: &str| {
        sources
            .iter()
            .position(|s| s.name == file)
            .unwrap_or(usize::MAX)
    };
    for p in problems {
        let lint = match p.kind {
            ProblemKind::Syntax => Lint::Yaml,
            ProblemKind::UnknownField => Lint::UnknownField,
            ProblemKind::Shape => Lint::Invalid,
            ProblemKind::Compile => Lint::Compile,
            ProblemKind::Duplicate => Lint::DuplicateId,
        };
        let f = from_error(lint, p.error);
        out.push((order(&f.file), f));
    }
    for (i, source) in sources.iter().enumerate() {
        // Unparsable files were reported above.
        let Ok(docs) = parse_documents(source) else {
            continue;
        };
        for doc in &docs {
            let mut found = Vec::new();
            lint_document(doc, &mut found);
            out.extend(found.into_iter().map(|f| (i, f)));
        }
    }
    out.sort_by_key(|(i, f)| (*i, f.pos.map(|p| (p.line, p.column))));
    out.into_iter().map(|(_, f)| f).collect()
}

fn from_error(lint: Lint, e: Error) -> LintFinding {
    let (file, pos, rule, message) = match e {
        Error::Pack {
            file,
            pos,
            rule,
            message,
        } => (file, pos, rule, message),
        Error::Yaml {
            source_name,
            pos,
            message,
        } => (source_name, pos, None, message),
        other => {
            let (file, pos) = other
                .location()
                .map(|(f, p)| (f.to_string(), p))
                .unwrap_or_default();
            (file, pos, None, other.to_string())
        }
    };
    LintFinding {
        lint,
        severity: lint.severity(),
        file,
        pos,
        rule,
        message,
    }
}

/// Who owns a piece of CEL: decides which variables it can see.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Owner {
    /// Match conditions, table entries: no variables.
    Pack,
    /// Pack variable `i`.
    PackVar(usize),
    /// Fragment `name`.
    Fragment(String),
    /// Rule `k`'s `forEach.in` (evaluated before the rule's variables).
    RuleForEach(usize),
    /// Rule `k`'s variable `j`.
    RuleVar(usize, usize),
    /// Rule `k`'s `when`, `validate` and `mutate`.
    Rule(usize),
}

/// One CEL text with its place in the file.
struct Code {
    path: FieldPath,
    text: String,
    owner: Owner,
}

/// What a document's code refers to: CEL texts and `{$fragment: name}` insertions.
#[derive(Default)]
struct Refs {
    code: Vec<Code>,
    fragments: Vec<(String, Owner)>,
}

impl Refs {
    fn cel(&mut self, value: Option<&Value>, path: FieldPath, owner: Owner) {
        if let Some(text) = value.and_then(Value::as_str) {
            self.code.push(Code {
                path,
                text: text.to_string(),
                owner,
            });
        }
    }

    /// Every `${{ … }}`, `$if` and `{$fragment: …}` of a template.
    fn template(&mut self, value: &Value, path: FieldPath, owner: &Owner) {
        match value {
            Value::String(s) => {
                for text in embedded_cel(s) {
                    self.code.push(Code {
                        path: path.clone(),
                        text,
                        owner: owner.clone(),
                    });
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    self.template(item, path.clone().index(i), owner);
                }
            }
            Value::Object(map) => {
                for (k, v) in map {
                    let at = path.clone().key(k.clone());
                    match (k.as_str(), v) {
                        ("$fragment", Value::String(name)) => {
                            self.fragments.push((name.clone(), owner.clone()));
                        }
                        ("$if", Value::String(cond)) => {
                            let cond = cond.trim();
                            let inner = cond
                                .strip_prefix("${{")
                                .and_then(|c| c.strip_suffix("}}"))
                                .unwrap_or(cond);
                            self.code.push(Code {
                                path: at,
                                text: inner.to_string(),
                                owner: owner.clone(),
                            });
                        }
                        _ => {
                            for text in embedded_cel(k) {
                                self.code.push(Code {
                                    path: at.clone(),
                                    text,
                                    owner: owner.clone(),
                                });
                            }
                            self.template(v, at, owner);
                        }
                    }
                }
            }
            _ => {}
        }
    }
}

/// The texts of the `${{ … }}` parts of a template string.
fn embedded_cel(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(start) = rest.find("${{") {
        let after = rest.get(start + 3..).unwrap_or("");
        let Some(end) = after.find("}}") else { break };
        out.push(after.get(..end).unwrap_or("").trim().to_string());
        rest = after.get(end + 2..).unwrap_or("");
    }
    out
}

fn items(v: &Value, key: &str) -> Vec<Value> {
    v.get(key)
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn root(key: &str) -> FieldPath {
    FieldPath::root().key(key)
}

/// The CEL and fragment references of a `RulePack` or `Table` document.
fn collect_refs(doc: &Value) -> Refs {
    let mut refs = Refs::default();
    for (i, c) in items(doc.get("match").unwrap_or(&Value::Null), "matchConditions")
        .iter()
        .enumerate()
    {
        let path = root("match")
            .key("matchConditions")
            .index(i)
            .key("expression");
        refs.cel(c.get("expression"), path, Owner::Pack);
    }
    for (i, v) in items(doc, "variables").iter().enumerate() {
        let path = root("variables").index(i).key("expression");
        refs.cel(v.get("expression"), path, Owner::PackVar(i));
    }
    if let Some(frags) = doc.get("fragments").and_then(Value::as_object) {
        for (name, v) in frags {
            let owner = Owner::Fragment(name.clone());
            refs.template(v, root("fragments").key(name.clone()), &owner);
        }
    }
    for (i, e) in items(doc, "entries").iter().enumerate() {
        let base = root("entries").index(i);
        refs.cel(e.get("include"), base.clone().key("include"), Owner::Pack);
        if let Some(obj) = e.as_object() {
            for (k, v) in obj.iter().filter(|(k, _)| *k != "id" && *k != "include") {
                refs.template(v, base.clone().key(k.clone()), &Owner::Pack);
            }
        }
    }
    for (k, r) in items(doc, "rules").iter().enumerate() {
        let base = root("rules").index(k);
        refs.cel(r.get("when"), base.clone().key("when"), Owner::Rule(k));
        refs.cel(
            r.get("forEach").and_then(|f| f.get("in")),
            base.clone().key("forEach").key("in"),
            Owner::RuleForEach(k),
        );
        for (j, v) in items(r, "variables").iter().enumerate() {
            let path = base.clone().key("variables").index(j).key("expression");
            refs.cel(v.get("expression"), path, Owner::RuleVar(k, j));
        }
        let validate = r.get("validate").unwrap_or(&Value::Null);
        for key in ["expression", "messageExpression", "fieldPathExpression"] {
            let path = base.clone().key("validate").key(key);
            refs.cel(validate.get(key), path, Owner::Rule(k));
        }
        for (j, m) in items(r, "mutate").iter().enumerate() {
            refs.template(m, base.clone().key("mutate").index(j), &Owner::Rule(k));
        }
    }
    refs
}

fn lint_document(doc: &Document, out: &mut Vec<LintFinding>) {
    let kind = doc.value.get("kind").and_then(Value::as_str).unwrap_or("");
    if kind != "RulePack" && kind != "Table" {
        return;
    }
    let refs = collect_refs(&doc.value);
    let name = doc
        .value
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let what = if kind == "Table" { "table" } else { "pack" };
    check_messages(doc, out);
    check_pack_variables(doc, &refs, name, out);
    check_rule_variables(doc, &refs, out);
    check_fragments(doc, &refs, what, name, out);
    check_escaped_keys(doc, &refs, out);
    check_undefined_variables(doc, &refs, out);
}

/// Every `variables.<name>` (or `variables.?<name>`) a CEL text reads, in order.
fn variables_read(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let word: Vec<char> = "variables".chars().collect();
    let mut i = 0;
    while i + word.len() <= chars.len() {
        let at_word = chars.get(i..i + word.len()) == Some(word.as_slice())
            && !i
                .checked_sub(1)
                .and_then(|p| chars.get(p))
                .is_some_and(|c| is_ident(*c) || *c == '.');
        if at_word {
            let mut j = i + word.len();
            if chars.get(j) == Some(&'.') {
                j += 1;
                if chars.get(j) == Some(&'?') {
                    j += 1;
                }
                let start = j;
                while chars.get(j).is_some_and(|c| is_ident(*c)) {
                    j += 1;
                }
                if j > start {
                    out.push(chars.get(start..j).unwrap_or(&[]).iter().collect());
                }
            }
            i = j.max(i + 1);
        } else {
            i += 1;
        }
    }
    out
}

/// The `undefined-variable` findings of one rule document (the loader refuses the first).
pub(crate) fn undefined_variables(doc: &Document) -> Vec<LintFinding> {
    let kind = doc.value.get("kind").and_then(Value::as_str).unwrap_or("");
    if kind != "RulePack" && kind != "Table" {
        return Vec::new();
    }
    let mut out = Vec::new();
    check_undefined_variables(doc, &collect_refs(&doc.value), &mut out);
    out
}

fn check_undefined_variables(doc: &Document, refs: &Refs, out: &mut Vec<LintFinding>) {
    let pack_vars: Vec<String> = var_names(&doc.value).into_iter().flatten().collect();
    let rule_vars: Vec<Vec<String>> = items(&doc.value, "rules")
        .iter()
        .map(|r| var_names(r).into_iter().flatten().collect())
        .collect();
    let is_table = doc.value.get("kind").and_then(Value::as_str) == Some("Table");
    for c in &refs.code {
        let visible: Vec<&String> = match &c.owner {
            _ if is_table => Vec::new(),
            Owner::Pack | Owner::Fragment(_) | Owner::RuleForEach(_) => pack_vars.iter().collect(),
            Owner::PackVar(i) => pack_vars.iter().take(*i).collect(),
            Owner::RuleVar(k, j) => pack_vars
                .iter()
                .chain(
                    rule_vars
                        .get(*k)
                        .into_iter()
                        .flat_map(|v| v.iter().take(*j)),
                )
                .collect(),
            Owner::Rule(k) => pack_vars
                .iter()
                .chain(rule_vars.get(*k).into_iter().flatten())
                .collect(),
        };
        for name in variables_read(&c.text) {
            if !visible.iter().any(|v| **v == name) {
                let rule = match &c.owner {
                    Owner::RuleForEach(k) | Owner::RuleVar(k, _) | Owner::Rule(k) => {
                        rule_id(doc, *k)
                    }
                    _ => None,
                };
                out.push(finding(
                    doc,
                    Lint::UndefinedVariable,
                    &c.path,
                    rule,
                    format!(
                        "variables.{name} is not defined here: no earlier pack or rule variable is named {name:?}"
                    ),
                ));
            }
        }
    }
}

fn finding(
    doc: &Document,
    lint: Lint,
    path: &FieldPath,
    rule: Option<&str>,
    message: String,
) -> LintFinding {
    LintFinding {
        lint,
        severity: lint.severity(),
        file: doc.source.name.clone(),
        pos: doc.spans.lookup(path),
        rule: rule.map(str::to_string),
        message,
    }
}

fn rule_id(doc: &Document, k: usize) -> Option<&str> {
    doc.value.get("rules")?.get(k)?.get("id")?.as_str()
}

/// What makes a fixed message read like CEL, if anything.
fn cel_smell(message: &str) -> Option<&'static str> {
    for ident in ["object", "variables", "params", "oldObject", "self"] {
        if find_word(message, ident, false, |rest| rest.starts_with('.')).is_some() {
            return Some(match ident {
                "object" => "object.",
                "variables" => "variables.",
                "params" => "params.",
                "oldObject" => "oldObject.",
                _ => "self.",
            });
        }
    }
    for needle in [
        "+ '",
        "' +",
        "+ \"",
        "\" +",
        "size(",
        "string(",
        "strings.quote(",
    ] {
        if message.contains(needle) {
            return Some(needle);
        }
    }
    let t = message.trim_start();
    if (t.starts_with('\'') || t.starts_with('"')) && t.contains('+') {
        return Some("a quoted string joined with +");
    }
    None
}

fn check_messages(doc: &Document, out: &mut Vec<LintFinding>) {
    for (k, r) in items(&doc.value, "rules").iter().enumerate() {
        let Some(message) = r
            .get("validate")
            .and_then(|v| v.get("message"))
            .and_then(Value::as_str)
        else {
            continue;
        };
        let Some(smell) = cel_smell(message) else {
            continue;
        };
        let path = root("rules").index(k).key("validate").key("message");
        let what = if smell.contains(' ') && !smell.starts_with(['+', '\'', '"']) {
            smell.to_string()
        } else {
            format!("{smell:?}")
        };
        out.push(finding(
            doc,
            Lint::MessageLooksLikeCel,
            &path,
            rule_id(doc, k),
            format!(
                "message looks like a CEL expression (it contains {what}) but is printed as \
                 written; use messageExpression to compute the message"
            ),
        ));
    }
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Byte offset of the first occurrence of the word `word` (not part of a longer identifier, and
/// not selected from something else unless `selected`) whose following text satisfies `after`.
fn find_word(
    text: &str,
    word: &str,
    selected: bool,
    after: impl Fn(&str) -> bool,
) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = text.get(from..).and_then(|t| t.find(word)) {
        let at = from + i;
        let end = at + word.len();
        let before_ok = text
            .get(..at)
            .and_then(|b| b.chars().next_back())
            .is_none_or(|c| !is_ident(c) && (selected || c != '.'));
        let rest = text.get(end..).unwrap_or("");
        if before_ok && after(rest) {
            return Some(at);
        }
        from = end;
    }
    None
}

/// True when `text` refers to `<ns>.<name>`, `<ns>.?<name>` or `<ns>[?]'<name>'`.
fn refers(text: &str, ns: &str, name: &str) -> bool {
    find_word(text, ns, false, |rest| {
        let rest = rest.trim_start();
        if let Some(sel) = rest.strip_prefix('.') {
            let sel = sel.strip_prefix('?').unwrap_or(sel).trim_start();
            return sel
                .strip_prefix(name)
                .is_some_and(|after| !after.starts_with(is_ident));
        }
        if let Some(idx) = rest.strip_prefix('[') {
            let idx = idx.strip_prefix('?').unwrap_or(idx).trim_start();
            return [format!("'{name}'"), format!("\"{name}\"")]
                .iter()
                .any(|q| idx.starts_with(q.as_str()));
        }
        false
    })
    .is_some()
}

fn var_names(v: &Value) -> Vec<Option<String>> {
    items(v, "variables")
        .iter()
        .map(|v| v.get("name").and_then(Value::as_str).map(str::to_string))
        .collect()
}

/// True when rule `k`'s code at `owner` sees the pack variable `name` (not a rule variable of
/// the same name).
fn sees_pack_var(rule_vars: &[Vec<Option<String>>], owner: &Owner, name: &str) -> bool {
    let shadow = |k: usize| {
        rule_vars
            .get(k)
            .and_then(|vars| vars.iter().position(|n| n.as_deref() == Some(name)))
    };
    match owner {
        Owner::Pack | Owner::Fragment(_) | Owner::PackVar(_) | Owner::RuleForEach(_) => true,
        // Rule variables are evaluated in order, starting from the pack's.
        Owner::RuleVar(k, j) => shadow(*k).is_none_or(|m| *j <= m),
        Owner::Rule(k) => shadow(*k).is_none(),
    }
}

fn check_pack_variables(doc: &Document, refs: &Refs, pack: &str, out: &mut Vec<LintFinding>) {
    let rule_vars: Vec<Vec<Option<String>>> =
        items(&doc.value, "rules").iter().map(var_names).collect();
    for (i, name) in var_names(&doc.value).into_iter().enumerate() {
        let Some(name) = name else { continue };
        let used = refs.code.iter().any(|c| {
            c.owner != Owner::PackVar(i)
                && sees_pack_var(&rule_vars, &c.owner, &name)
                && refers(&c.text, "variables", &name)
        });
        if !used {
            out.push(finding(
                doc,
                Lint::UnusedVariable,
                &root("variables").index(i).key("name"),
                None,
                format!(
                    "pack variable {name:?} is never used: no expression or template of pack \
                     {pack} refers to variables.{name}"
                ),
            ));
        }
    }
}

fn check_rule_variables(doc: &Document, refs: &Refs, out: &mut Vec<LintFinding>) {
    for (k, r) in items(&doc.value, "rules").iter().enumerate() {
        for (m, name) in var_names(r).into_iter().enumerate() {
            let Some(name) = name else { continue };
            let used = refs.code.iter().any(|c| {
                let sees = match c.owner {
                    Owner::RuleVar(kk, j) => kk == k && j > m,
                    Owner::Rule(kk) => kk == k,
                    _ => false,
                };
                sees && refers(&c.text, "variables", &name)
            });
            if !used {
                out.push(finding(
                    doc,
                    Lint::UnusedVariable,
                    &root("rules").index(k).key("variables").index(m).key("name"),
                    rule_id(doc, k),
                    format!(
                        "variable {name:?} is never used: no later variable, when, validate or \
                         mutate of the rule refers to variables.{name}"
                    ),
                ));
            }
        }
    }
}

fn check_fragments(
    doc: &Document,
    refs: &Refs,
    what: &str,
    name: &str,
    out: &mut Vec<LintFinding>,
) {
    let Some(frags) = doc.value.get("fragments").and_then(Value::as_object) else {
        return;
    };
    for frag in frags.keys() {
        let own = Owner::Fragment(frag.clone());
        let inserted = refs
            .fragments
            .iter()
            .any(|(n, owner)| n == frag && *owner != own);
        let read = refs
            .code
            .iter()
            .any(|c| c.owner != own && refers(&c.text, "fragments", frag));
        if !inserted && !read {
            out.push(finding(
                doc,
                Lint::UnusedFragment,
                &root("fragments").key(frag.clone()),
                None,
                format!(
                    "fragment {frag:?} is never used: nothing in {what} {name} inserts \
                     {{$fragment: {frag}}} or reads fragments.{frag}"
                ),
            ));
        }
    }
}

/// `labels.app__dot__kubernetes__dot__io` → (byte offset, the selection text, the key).
fn escaped_selections(text: &str) -> Vec<(usize, String, String, bool)> {
    let mut out = Vec::new();
    for map in ["labels", "annotations"] {
        let mut from = 0;
        while let Some(at) = text.get(from..).and_then(|t| {
            find_word(t, map, true, |rest| rest.trim_start().starts_with('.')).map(|i| i + from)
        }) {
            let end = at + map.len();
            from = end;
            let rest = text.get(end..).unwrap_or("");
            let trimmed = rest.trim_start();
            let Some(sel) = trimmed.strip_prefix('.') else {
                continue;
            };
            let optional = sel.starts_with('?');
            let sel = sel.strip_prefix('?').unwrap_or(sel).trim_start();
            let ident: String = sel.chars().take_while(|c| is_ident(*c)).collect();
            if !["__dot__", "__slash__", "__dash__"]
                .iter()
                .any(|e| ident.contains(e))
            {
                continue;
            }
            let sel_end = end + (rest.len() - sel.len()) + ident.len();
            let written = text.get(at..sel_end).unwrap_or("").to_string();
            let key = ident
                .replace("__dot__", ".")
                .replace("__slash__", "/")
                .replace("__dash__", "-")
                .replace("__underscores__", "__");
            out.push((at, written, key, optional));
        }
    }
    out.sort_by_key(|(at, ..)| *at);
    out
}

fn check_escaped_keys(doc: &Document, refs: &Refs, out: &mut Vec<LintFinding>) {
    for c in &refs.code {
        for (_, written, key, optional) in escaped_selections(&c.text) {
            let map = if written.starts_with("labels") {
                "labels"
            } else {
                "annotations"
            };
            let q = if optional { "?" } else { "" };
            let rule = match path_rule(&c.path) {
                Some(k) => rule_id(doc, k),
                None => None,
            };
            let mut f = finding(
                doc,
                Lint::EscapedKeyOnMap,
                &c.path,
                rule,
                format!(
                    "{written} never matches: {map} is a free-form map whose keys are not \
                     escaped, so __dot__/__slash__ stay literal there; write {map}[{q}'{key}']"
                ),
            );
            f.pos = f.pos.map(|p| locate(&doc.source, p, &written));
            out.push(f);
        }
    }
}

/// The rule index of a `rules[k]…` path.
fn path_rule(path: &FieldPath) -> Option<usize> {
    use crate::path::Segment;
    match path.segments() {
        [Segment::Key(k), Segment::Index(i), ..] if k == "rules" => Some(*i),
        _ => None,
    }
}

/// The position of `needle` in the scalar that starts at `start` (the scalar may be quoted or
/// a block spanning later lines); `start` when it cannot be found there.
fn locate(source: &Source, start: Pos, needle: &str) -> Pos {
    let from = source.offset_of(start);
    // A scalar holding the needle spans at most a few lines more than the needle's length.
    let window_end = source
        .text
        .char_indices()
        .skip_while(|(i, _)| *i < from)
        .nth(needle.len() * 4 + 512)
        .map_or(source.text.len(), |(i, _)| i);
    let Some(found) = source
        .text
        .get(from..window_end)
        .and_then(|w| w.find(needle))
    else {
        return start;
    };
    pos_of_offset(&source.text, from + found)
}

fn pos_of_offset(text: &str, offset: usize) -> Pos {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before.get(line_start..).unwrap_or("").chars().count() + 1;
    Pos { line, column }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str =
        "apiVersion: policy.nvcre.nvidia.com/v1alpha1\nkind: RulePack\nmetadata:\n  name: p\n";

    fn run(text: &str) -> Vec<String> {
        lint(&[Source::new("rules/x.yaml", text)])
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    fn pack(body: &str) -> Vec<String> {
        run(&format!("{HEAD}{body}"))
    }

    #[test]
    fn a_clean_pack_has_no_findings() {
        assert_eq!(
            pack(
                "variables:\n- {name: a, expression: object.a}\nrules:\n- id: r\n  variables:\n  - {name: b, expression: variables.a}\n  validate: {expression: 'variables.b', messageExpression: \"'x' + string(variables.b)\"}\n"
            ),
            Vec::<String>::new()
        );
    }

    #[test]
    fn every_compile_error_is_reported_not_only_the_first() {
        assert_eq!(
            pack(
                "rules:\n- id: a\n  validate:\n    expression: 'object.('\n- id: b\n  validate:\n    expression: 'true'\n- id: c\n  when: '1 +'\n  validate:\n    expression: 'true'\n"
            ),
            [
                "rules/x.yaml:8:17: error[compile]: rule a: CEL does not compile: Syntax error: no viable alternative at input '.(' (expression column 8)",
                "rules/x.yaml:13:9: error[compile]: rule c: CEL does not compile: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER} (expression column 4)",
            ]
        );
    }

    #[test]
    fn duplicate_rule_ids() {
        assert_eq!(
            pack(
                "rules:\n- id: r\n  validate: {expression: 'true'}\n- id: r\n  validate: {expression: 'true'}\n"
            ),
            [
                "rules/x.yaml:8:7: error[duplicate-id]: rule r: duplicate rule id (first defined at rules/x.yaml:6:3)"
            ]
        );
    }

    #[test]
    fn unknown_fields_in_two_rules_are_both_reported_with_their_lines() {
        assert_eq!(
            pack(
                "rules:\n- id: a\n  validate:\n    expresion: 'true'\n- id: b\n  sevrity: error\n  validate: {expression: 'true'}\n"
            ),
            [
                "rules/x.yaml:8:5: error[unknown-field]: rule a: unknown field `expresion`, expected one of `expression`, `message`, `messageExpression`, `fieldPath`, `fieldPathExpression`",
                "rules/x.yaml:10:3: error[unknown-field]: rule b: unknown field `sevrity`, expected one of `id`, `severity`, `description`, `when`, `variables`, `forEach`, `validate`, `mutate`",
            ]
        );
    }

    #[test]
    fn yaml_errors_and_bad_documents_do_not_stop_other_files() {
        let findings: Vec<String> = lint(&[
            Source::new("rules/a.yaml", "key: [unclosed\n"),
            Source::new("rules/b.yaml", format!("{HEAD}extra: 1\n")),
        ])
        .iter()
        .map(ToString::to_string)
        .collect();
        assert_eq!(
            findings,
            [
                "rules/a.yaml:1:6: error[yaml]: unclosed bracket '['",
                "rules/b.yaml:5:1: error[unknown-field]: unknown field `extra`, expected one of `apiVersion`, `kind`, `metadata`, `stage`, `match`, `variables`, `fragments`, `rules`, `entries`",
            ]
        );
    }

    #[test]
    fn messages_that_look_like_cel() {
        let one = |m: &str| {
            pack(&format!(
                "rules:\n- id: r\n  validate:\n    expression: 'true'\n    message: {m}\n"
            ))
        };
        assert_eq!(
            one("\"'queue ' + object.spec.queue\""),
            [
                "rules/x.yaml:9:14: warning[message-looks-like-cel]: rule r: message looks like a CEL expression (it contains \"object.\") but is printed as written; use messageExpression to compute the message"
            ]
        );
        assert_eq!(
            one("\"too many: size(labels)\""),
            [
                "rules/x.yaml:9:14: warning[message-looks-like-cel]: rule r: message looks like a CEL expression (it contains \"size(\") but is printed as written; use messageExpression to compute the message"
            ]
        );
        assert_eq!(
            one("\"'a' +  'b'\""),
            [
                "rules/x.yaml:9:14: warning[message-looks-like-cel]: rule r: message looks like a CEL expression (it contains \"' +\") but is printed as written; use messageExpression to compute the message"
            ]
        );
        assert_eq!(
            one("'\"a\"+ x'"),
            [
                "rules/x.yaml:9:14: warning[message-looks-like-cel]: rule r: message looks like a CEL expression (it contains a quoted string joined with +) but is printed as written; use messageExpression to compute the message"
            ]
        );
        assert_eq!(
            one("\"spec.queue in body should match '^[a-z]+$'\""),
            Vec::<String>::new()
        );
        assert_eq!(
            one("\"orchestration.placement: Unpinned\""),
            Vec::<String>::new()
        );
    }

    #[test]
    fn unused_pack_and_rule_variables() {
        assert_eq!(
            pack(
                "variables:\n- {name: used, expression: object.a}\n- {name: unused, expression: variables.unused}\n- {name: shadowed, expression: '1'}\nrules:\n- id: r\n  variables:\n  - {name: shadowed, expression: variables.used}\n  - {name: idle, expression: '2'}\n  validate: {expression: 'variables.shadowed > 0'}\n"
            ),
            [
                "rules/x.yaml:7:10: warning[unused-variable]: pack variable \"unused\" is never used: no expression or template of pack p refers to variables.unused",
                "rules/x.yaml:7:30: error[undefined-variable]: variables.unused is not defined here: no earlier pack or rule variable is named \"unused\"",
                "rules/x.yaml:8:10: warning[unused-variable]: pack variable \"shadowed\" is never used: no expression or template of pack p refers to variables.shadowed",
                "rules/x.yaml:13:12: warning[unused-variable]: rule r: variable \"idle\" is never used: no later variable, when, validate or mutate of the rule refers to variables.idle",
            ]
        );
    }

    #[test]
    fn variables_read_by_index_or_optional_select_count_as_used() {
        assert_eq!(
            pack(
                "variables:\n- {name: a, expression: '1'}\n- {name: b, expression: '2'}\nrules:\n- id: r\n  validate: {expression: \"variables['a'] + variables.?b.orValue(0) > 0\"}\n"
            ),
            Vec::<String>::new()
        );
        // `variables.ab` is not `variables.a`.
        assert_eq!(
            pack(
                "variables:\n- {name: a, expression: '1'}\nrules:\n- id: r\n  validate: {expression: 'variables.ab > 0'}\n"
            ),
            [
                "rules/x.yaml:6:10: warning[unused-variable]: pack variable \"a\" is never used: no expression or template of pack p refers to variables.a",
                "rules/x.yaml:9:26: error[undefined-variable]: rule r: variables.ab is not defined here: no earlier pack or rule variable is named \"ab\""
            ]
        );
    }

    #[test]
    fn undefined_variables_are_errors() {
        assert_eq!(
            pack(
                "variables:\n  - {name: spec, expression: object.spec}\nrules:\n  - id: r\n    validate:\n      expression: variables.spek.image != ''\n"
            ),
            [
                "rules/x.yaml:6:12: warning[unused-variable]: pack variable \"spec\" is never used: no expression or template of pack p refers to variables.spec",
                "rules/x.yaml:10:19: error[undefined-variable]: rule r: variables.spek is not defined here: no earlier pack or rule variable is named \"spek\""
            ]
        );
    }

    #[test]
    fn unused_fragments_in_tables() {
        let text = "apiVersion: policy.nvcre.nvidia.com/v1alpha1\nkind: Table\nmetadata: {name: t}\nfragments:\n  inserted: [a]\n  read: [b]\n  idle: [c]\nentries:\n- id: e\n  args: [{$fragment: inserted}, {$splice: '${{ fragments.read }}'}]\n";
        assert_eq!(
            run(text),
            [
                "rules/x.yaml:7:3: warning[unused-fragment]: fragment \"idle\" is never used: nothing in table t inserts {$fragment: idle} or reads fragments.idle"
            ]
        );
    }

    #[test]
    fn escaped_keys_on_labels_and_annotations() {
        assert_eq!(
            pack(
                "rules:\n- id: r\n  validate:\n    expression: object.metadata.labels.app__dot__kubernetes__dot__io == 'x'\n- id: s\n  validate:\n    expression: >-\n      has(object.spec.a__dot__b) &&\n      object.metadata.?annotations.?example__dot__com__slash__team.orValue('') != ''\n"
            ),
            [
                "rules/x.yaml:8:33: error[escaped-key-on-map]: rule r: labels.app__dot__kubernetes__dot__io never matches: labels is a free-form map whose keys are not escaped, so __dot__/__slash__ stay literal there; write labels['app.kubernetes.io']",
                "rules/x.yaml:13:24: error[escaped-key-on-map]: rule s: annotations.?example__dot__com__slash__team never matches: annotations is a free-form map whose keys are not escaped, so __dot__/__slash__ stay literal there; write annotations[?'example.com/team']",
            ]
        );
    }
}
