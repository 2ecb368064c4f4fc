//! Lints for rule files: the loader's problems, all of them rather than the first, plus mistakes
//! that load fine but cannot be what the author meant.
//!
//! [`lint`] reports, each with a [`Lint`] id, the file, line and column:
//!
//! - `yaml`, `unknown-field`, `invalid`, `compile`, `duplicate-id`, `undefined-variable`,
//!   `contract`: what the loader refuses ([`RuleSet::load`] gathers them all; the lint shows
//!   them with their ids);
//! - `message-looks-like-cel`: a fixed `message` that reads like CEL (`object.`, `variables.`,
//!   `params.`, `+ '`, `size(`, …), which is printed as written; `messageExpression` computes;
//! - `unused-variable`: a pack or rule variable that no expression reads (`variables.<name>`,
//!   `variables.?<name>` or `variables['<name>']`, found in each expression's parsed AST);
//! - `unused-fragment`: a fragment that nothing inserts (`{$fragment: name}`) or reads
//!   (`fragments.<name>`);
//! - `escaped-key-on-map`: a key escaped with `__dot__` / `__slash__` / `__dash__` selected from
//!   `labels` or `annotations`. Escaping applies to schema fields only; the keys of these
//!   free-form maps are never unescaped, so the selection never matches. `['key']` does.
//!
//! - `cel-cost`: an expression whose estimated worst case ([`crate::cost`]) exceeds the
//!   per-expression CEL cost limit (`--cel-cost-limit`), with every list of the input as long
//!   as the YAML node budget allows. A warning, not a refusal: the estimate cannot know how
//!   long the lists of real documents are (nor see guards such as `size(l) <= 10 && …`); at
//!   run time such a document makes the rule a rule error.
//!
//! The lint reads what the loader produced (compiled packs and tables, and the problems of
//! what did not compile); it knows the rule-file format, not any particular policy. The unused
//! lints stay quiet for a pack or table that did not compile whole (a rule left out would look
//! unused).

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use crate::contract::Contract;
use crate::cost::Binding;
use crate::error::Error;
use crate::expr::{Item, Template, VARIABLE_PREFIX};
use crate::finding::Severity;
use crate::pack::{CompiledPack, Mutation, ProblemKind, RuleSet, Table};
use crate::path::FieldPath;
use crate::sites::{Owner, Site, pack_sites, reads, table_sites};
use crate::source::{Pos, Source, SpanIndex};

/// What a [`LintFinding`] is about. [`Lint::id`] is the name shown in brackets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Lint {
    /// `yaml`: the file is not YAML (or is too large), or cannot be read.
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
    /// `contract`: a breach of the caller's [`Contract`] (unknown stage or table, a row that
    /// does not fit its schema, a param the stage does not pass).
    Contract,
    /// `cel-cost`: an expression whose estimated worst-case CEL cost exceeds the
    /// per-expression limit.
    CelCost,
    /// `empty-file`: a rule file without a document (emptied or truncated: its packs and
    /// tables are gone without a word).
    EmptyFile,
    /// `missing-table`: a table the caller's [`Contract`] declares that no file defines, in a
    /// directory that defines others (a set used whole, as `--rules` or a controller's mounted
    /// rules, is refused without it, so an error).
    MissingTable,
    /// `empty-stage`: a stage the caller's [`Contract`] declares that no pack runs in, in a
    /// directory that defines tables (a set used whole is refused without it).
    EmptyStage,
    /// `never-matches`: a table row whose condition names a value that never occurs (a caller's
    /// lint: the pipeline knows which values occur).
    NeverMatches,
    /// `ambiguous-id`: a table row whose id is also a rule's id or another table's row id:
    /// `rules explain ID` shows the other one (`TABLE/ID` names this row).
    AmbiguousId,
    /// `cannot-render`: a set that loads but fails a trial render (a caller's lint: the
    /// pipeline renders; a controller refuses such a set).
    CannotRender,
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
            Lint::Contract => "contract",
            Lint::CelCost => "cel-cost",
            Lint::EmptyFile => "empty-file",
            Lint::MissingTable => "missing-table",
            Lint::EmptyStage => "empty-stage",
            Lint::NeverMatches => "never-matches",
            Lint::AmbiguousId => "ambiguous-id",
            Lint::CannotRender => "cannot-render",
        }
    }

    /// How serious the lint is: everything the loader refuses and `escaped-key-on-map` (a
    /// selection that can never match) are errors; the rest are warnings.
    pub fn severity(self) -> Severity {
        match self {
            Lint::MessageLooksLikeCel
            | Lint::UnusedVariable
            | Lint::UnusedFragment
            | Lint::CelCost
            | Lint::EmptyFile
            | Lint::NeverMatches
            | Lint::AmbiguousId => Severity::Warning,
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
    /// The rule or table entry, when the problem is inside one.
    pub rule: Option<crate::error::Inside>,
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
            write!(f, "{r}: ")?;
        }
        f.write_str(&self.message)
    }
}

/// Lints rule files (the sources a [`RuleSet`] would load), checking them against `contract`
/// when given. Findings come in source order, then line and column order.
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
/// let findings = lint(&[pack], None);
/// let ids: Vec<Lint> = findings.iter().map(|f| f.lint).collect();
/// assert_eq!(ids, [Lint::UnusedVariable, Lint::MessageLooksLikeCel]);
/// assert_eq!(
///     findings[0].to_string(),
///     "rules/p.yaml:5:12: warning[unused-variable]: pack variable \"unused\" is never used: \
///      no expression or template of pack p refers to variables.unused"
/// );
/// ```
pub fn lint(sources: &[Arc<Source>], contract: Option<&Contract>) -> Vec<LintFinding> {
    let (set, problems) = RuleSet::load_collecting(sources, contract);
    let order: HashMap<&str, usize> = sources
        .iter()
        .enumerate()
        .rev()
        .map(|(i, s)| (s.name.as_str(), i))
        .collect();
    let mut out: Vec<LintFinding> = Vec::new();
    // As at load: a file that does not parse or a misspelt stage is not also a stage without
    // a pack.
    let other_problems = !problems.is_empty();
    for p in problems {
        let lint = match p.kind {
            ProblemKind::Syntax => Lint::Yaml,
            ProblemKind::UnknownField => Lint::UnknownField,
            ProblemKind::Shape => Lint::Invalid,
            ProblemKind::Compile => Lint::Compile,
            ProblemKind::Duplicate => Lint::DuplicateId,
            ProblemKind::UndefinedVariable => Lint::UndefinedVariable,
            ProblemKind::Contract => Lint::Contract,
        };
        out.push(from_error(lint, p.error));
    }
    // A directory with none of the tables is a part of a set (packs linted alone); one with
    // some is a set used whole, which `--rules` and a controller refuse for an emptied file, a
    // lost table or a stage no pack runs in: errors there, as they are at load.
    let whole = contract.filter(|c| c.tables().iter().any(|t| set.table(&t.name).is_some()));
    for source in sources {
        if !has_document(&source.text) {
            out.push(LintFinding {
                lint: Lint::EmptyFile,
                severity: if whole.is_some() {
                    Severity::Error
                } else {
                    Lint::EmptyFile.severity()
                },
                file: source.name.clone(),
                pos: Some(Pos { line: 1, column: 1 }),
                rule: None,
                message: "the rule file has no document, so it loads nothing: an emptied or truncated file drops its packs and tables without a word; restore it, or delete it".to_string(),
            });
        }
    }
    if let Some(contract) = whole {
        let place = crate::pack::common_dir(sources);
        for stage in contract.stages().iter().filter(|_| !other_problems) {
            if !set
                .packs()
                .iter()
                .any(|p| p.stage.as_deref() == Some(stage.name.as_str()))
            {
                out.push(LintFinding {
                    lint: Lint::EmptyStage,
                    severity: Lint::EmptyStage.severity(),
                    file: place.clone(),
                    pos: None,
                    rule: None,
                    message: format!(
                        "no rule file defines a pack of stage {:?} ({}); the pipeline runs it, so a set used whole (--rules, a controller's mounted rules) is refused without it",
                        stage.name, stage.description
                    ),
                });
            }
        }
        for t in contract.tables() {
            if set.table(&t.name).is_none() {
                out.push(LintFinding {
                    lint: Lint::MissingTable,
                    severity: Lint::MissingTable.severity(),
                    file: place.clone(),
                    pos: None,
                    rule: None,
                    message: format!(
                        "no rule file defines table {:?} ({}); the pipeline renders it, so a set used whole (--rules, a controller's mounted rules) is refused without it",
                        t.name, t.description
                    ),
                });
            }
        }
    }
    for pack in set.packs() {
        lint_pack(pack, &mut out);
    }
    for table in &set.tables {
        lint_table(table, &mut out);
    }
    ambiguous_ids(&set, &mut out);
    out.sort_by_key(|f| {
        (
            order.get(f.file.as_str()).copied().unwrap_or(usize::MAX),
            f.pos.map(|p| (p.line, p.column)),
        )
    });
    out
}

/// Each table row whose id a rule or an earlier table's row already has (`ambiguous-id`): an id
/// names the first of them to `rules explain`, which reads rules first, then tables in load
/// order.
fn ambiguous_ids(set: &RuleSet, out: &mut Vec<LintFinding>) {
    let mut seen: HashMap<&str, String> = set
        .rules()
        .map(|(p, r)| {
            (
                r.id.as_str(),
                format!("rule {} ({}:{})", r.id, p.source.name, r.pos.line),
            )
        })
        .collect();
    for table in &set.tables {
        for e in &table.entries {
            if let Some(first) = seen.get(e.id.as_str()) {
                out.push(LintFinding {
                    lint: Lint::AmbiguousId,
                    severity: Lint::AmbiguousId.severity(),
                    file: table.source.name.clone(),
                    pos: Some(e.pos),
                    rule: Some(crate::error::Inside::Entry(e.id.clone())),
                    message: format!(
                        "row id {:?} of table {} is also the id of {first}: `rules explain {}` shows that one; rename the row, or explain it as {}/{}",
                        e.id, table.name, e.id, table.name, e.id
                    ),
                });
            } else {
                seen.insert(
                    e.id.as_str(),
                    format!(
                        "table {}'s row ({}:{})",
                        table.name, table.source.name, e.pos.line
                    ),
                );
            }
        }
    }
}

/// Turns an error of the loader (or of a caller's own whole-set check) into a finding of
/// `lint`, at the file, position and rule the error names.
pub fn from_error(lint: Lint, e: Error) -> LintFinding {
    let (file, pos, rule, message) = match e {
        Error::Pack {
            file,
            pos,
            rule,
            message,
        }
        | Error::Contract {
            file,
            pos,
            rule,
            message,
            ..
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

/// Where findings of one pack or table point.
struct At<'a> {
    source: &'a Source,
    spans: &'a SpanIndex,
    /// A table's: its ids are entries', not rules'.
    table: bool,
}

impl At<'_> {
    fn finding(
        &self,
        lint: Lint,
        path: &FieldPath,
        rule: Option<&str>,
        message: String,
    ) -> LintFinding {
        LintFinding {
            lint,
            severity: lint.severity(),
            file: self.source.name.clone(),
            pos: self.spans.lookup(path),
            rule: rule.map(|id| {
                if self.table {
                    crate::error::Inside::Entry(id.to_string())
                } else {
                    crate::error::Inside::Rule(id.to_string())
                }
            }),
            message,
        }
    }
}

fn root(key: &str) -> FieldPath {
    FieldPath::root().key(key)
}

/// The `{$fragment: name}` insertions of a template, with their owner.
fn insertions(t: &Template, owner: &Owner, out: &mut Vec<(String, Owner)>) {
    match t {
        Template::Fragment(n) => out.push((n.clone(), owner.clone())),
        Template::List(items) => {
            for i in items {
                match i {
                    Item::One(t) | Item::Splice(t) => insertions(t, owner, out),
                }
            }
        }
        Template::Map(entries) => {
            for (k, v) in entries {
                insertions(k, owner, out);
                insertions(v, owner, out);
            }
        }
        Template::If(_, then, otherwise) => {
            insertions(then, owner, out);
            if let Some(o) = otherwise {
                insertions(o, owner, out);
            }
        }
        Template::Literal(_) | Template::Expr(_) | Template::Interp(_) => {}
    }
}

fn lint_pack(pack: &CompiledPack, out: &mut Vec<LintFinding>) {
    let at = At {
        source: &pack.source,
        spans: &pack.spans,
        table: false,
    };
    let sites = pack_sites(pack);
    let rule_id = |k: usize| {
        pack.rules
            .iter()
            .find(|r| r.index == k)
            .map(|r| r.id.as_str())
    };
    check_messages(pack, &at, out);
    check_escaped_keys(&sites, &at, &rule_id, out);
    check_costs(
        &sites,
        &at,
        &rule_id,
        &pack.declared_vars,
        &bindings(pack),
        out,
    );
    let read: Vec<(&Owner, Vec<String>)> = sites
        .iter()
        .map(|s| (&s.owner, reads(s.expr).variables))
        .collect();
    let rule_vars: HashMap<usize, Vec<&str>> = pack
        .rules
        .iter()
        .map(|r| {
            (
                r.index,
                r.variables.iter().map(|(n, _)| n.as_str()).collect(),
            )
        })
        .collect();
    // True when code owned by `owner` sees the pack variable `name` (not a rule variable of the
    // same name).
    let sees_pack_var = |owner: &Owner, name: &str| {
        let shadow = |k: usize| {
            rule_vars
                .get(&k)
                .and_then(|vars| vars.iter().position(|n| *n == name))
        };
        match owner {
            Owner::Pack
            | Owner::Fragment(_)
            | Owner::PackVar(_)
            | Owner::RuleForEach(_)
            | Owner::Entry(_) => true,
            // Rule variables are evaluated in order, starting from the pack's.
            Owner::RuleVar(k, j) => shadow(*k).is_none_or(|m| *j <= m),
            Owner::Rule(k) => shadow(*k).is_none(),
        }
    };
    // A rule left out may read a pack variable: only a complete pack's are checked.
    let pack_vars = if pack.complete {
        pack.declared_vars.as_slice()
    } else {
        &[]
    };
    for (i, name) in pack_vars.iter().enumerate() {
        let used = read.iter().any(|(owner, vars)| {
            **owner != Owner::PackVar(i)
                && sees_pack_var(owner, name)
                && vars.iter().any(|v| v == name)
        });
        if !used {
            out.push(at.finding(
                Lint::UnusedVariable,
                &root("variables").index(i).key("name"),
                None,
                format!(
                    "pack variable {name:?} is never used: no expression or template of pack \
                     {} refers to variables.{name}",
                    pack.name
                ),
            ));
        }
    }
    for r in &pack.rules {
        let k = r.index;
        for (m, (name, _)) in r.variables.iter().enumerate() {
            let used = read.iter().any(|(owner, vars)| {
                let sees = match owner {
                    Owner::RuleVar(kk, j) => *kk == k && *j > m,
                    Owner::Rule(kk) => *kk == k,
                    _ => false,
                };
                sees && vars.iter().any(|v| v == name)
            });
            if !used {
                out.push(at.finding(
                    Lint::UnusedVariable,
                    &root("rules").index(k).key("variables").index(m).key("name"),
                    Some(&r.id),
                    format!(
                        "variable {name:?} is never used: no later variable, when, validate or \
                         mutate of the rule refers to variables.{name}"
                    ),
                ));
            }
        }
    }
    if !pack.complete {
        return;
    }
    let mut inserted = Vec::new();
    for (name, t) in &pack.fragments {
        insertions(t, &Owner::Fragment(name.clone()), &mut inserted);
    }
    for r in &pack.rules {
        for m in &r.mutate {
            let t = match m {
                Mutation::Merge { value, .. } => value,
                Mutation::Insert { values, .. } => values,
                Mutation::JsonPatch(ops) => ops,
            };
            insertions(t, &Owner::Rule(r.index), &mut inserted);
        }
    }
    check_fragments(
        &pack.fragments,
        &sites,
        &inserted,
        "pack",
        &pack.name,
        &at,
        out,
    );
}

fn lint_table(table: &Table, out: &mut Vec<LintFinding>) {
    let at = At {
        source: &table.source,
        spans: &table.spans,
        table: true,
    };
    let sites = table_sites(table);
    let entry_id = |i: usize| table.entry_id(i);
    check_escaped_keys(&sites, &at, &|i| entry_id(i), out);
    check_costs(
        &sites,
        &at,
        &|i| entry_id(i),
        &[],
        &Bindings::default(),
        out,
    );
    if !table.complete {
        return;
    }
    let mut inserted = Vec::new();
    for (name, t) in &table.fragments {
        insertions(t, &Owner::Fragment(name.clone()), &mut inserted);
    }
    for e in &table.entries {
        insertions(&e.body, &Owner::Entry(e.index), &mut inserted);
    }
    check_fragments(
        &table.fragments,
        &sites,
        &inserted,
        "table",
        &table.name,
        &at,
        out,
    );
}

fn check_fragments(
    fragments: &[(String, Template)],
    sites: &[Site<'_>],
    inserted: &[(String, Owner)],
    what: &str,
    name: &str,
    at: &At<'_>,
    out: &mut Vec<LintFinding>,
) {
    for (frag, _) in fragments {
        let own = Owner::Fragment(frag.clone());
        let is_inserted = inserted.iter().any(|(n, owner)| n == frag && *owner != own);
        let is_read = sites
            .iter()
            .any(|s| s.owner != own && reads(s.expr).fragments.iter().any(|f| f == frag));
        if !is_inserted && !is_read {
            out.push(at.finding(
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

fn check_messages(pack: &CompiledPack, at: &At<'_>, out: &mut Vec<LintFinding>) {
    for r in &pack.rules {
        let path = root("rules").index(r.index).key("validate").key("message");
        // A rule without `message` gets a default one, which is not the author's text.
        let Some(message) = r.message().filter(|_| at.spans.contains(&path)) else {
            continue;
        };
        let Some(smell) = cel_smell(message) else {
            continue;
        };
        let what = if smell.contains(' ') && !smell.starts_with(['+', '\'', '"']) {
            smell.to_string()
        } else {
            format!("{smell:?}")
        };
        out.push(at.finding(
            Lint::MessageLooksLikeCel,
            &path,
            Some(&r.id),
            format!(
                "message looks like a CEL expression (it contains {what}) but is printed as \
                 written; use messageExpression to compute the message"
            ),
        ));
    }
}

fn check_escaped_keys<'a>(
    sites: &[Site<'_>],
    at: &At<'_>,
    rule_id: &dyn Fn(usize) -> Option<&'a str>,
    out: &mut Vec<LintFinding>,
) {
    for s in sites {
        for (_, written, key, optional) in escaped_selections(s.expr.text()) {
            let map = if written.starts_with("labels") {
                "labels"
            } else {
                "annotations"
            };
            let q = if optional { "?" } else { "" };
            let rule = match s.owner {
                Owner::RuleForEach(k) | Owner::RuleVar(k, _) | Owner::Rule(k) => rule_id(k),
                _ => None,
            };
            let mut f = at.finding(
                Lint::EscapedKeyOnMap,
                &s.path,
                rule,
                format!(
                    "{written} never matches: {map} is a free-form map whose keys are not \
                     escaped, so __dot__/__slash__ stay literal there; write {map}[{q}'{key}']"
                ),
            );
            f.pos = f.pos.map(|p| locate(at.source, p, &written));
            out.push(f);
        }
    }
}

/// What the cost estimate knows of the bindings (see [`crate::cost::Binding`]): of the pack
/// (its variables), and per rule (its `forEach` item and variables, over the pack's).
#[derive(Default)]
struct Bindings {
    pack: HashMap<String, Binding>,
    rules: HashMap<usize, HashMap<String, Binding>>,
}

impl Bindings {
    /// The bindings code owned by `owner` sees.
    fn of(&self, owner: &Owner) -> &HashMap<String, Binding> {
        match owner {
            Owner::RuleForEach(k) | Owner::RuleVar(k, _) | Owner::Rule(k) => {
                self.rules.get(k).unwrap_or(&self.pack)
            }
            _ => &self.pack,
        }
    }
}

fn bindings(pack: &CompiledPack) -> Bindings {
    let add = |set: &mut HashMap<String, Binding>, name: String, expr: &crate::expr::Expr| {
        let b = Binding::of(expr.ast(), &|n| set.get(n).copied());
        set.insert(name, b);
    };
    let mut out = Bindings::default();
    for (name, e) in &pack.variables {
        add(&mut out.pack, format!("{VARIABLE_PREFIX}{name}"), e);
    }
    for r in &pack.rules {
        let mut set = out.pack.clone();
        if let Some((e, item, _)) = &r.for_each {
            // The item is an element of the list: a part when the list is one.
            let list = Binding::of(e.ast(), &|n| set.get(n).copied());
            set.insert(
                item.clone(),
                Binding {
                    input: list.input,
                    len: None,
                },
            );
        }
        for (name, e) in &r.variables {
            add(&mut set, format!("{VARIABLE_PREFIX}{name}"), e);
        }
        out.rules.insert(r.index, set);
    }
    out
}

/// `cel-cost`: every expression whose estimated worst case exceeds the per-expression limit.
fn check_costs<'a>(
    sites: &[Site<'_>],
    at: &At<'_>,
    id: &dyn Fn(usize) -> Option<&'a str>,
    pack_vars: &[String],
    bindings: &Bindings,
    out: &mut Vec<LintFinding>,
) {
    let limits = crate::limits::limits();
    let bound = u64::try_from(limits.yaml_nodes).unwrap_or(u64::MAX);
    for s in sites {
        let seen = bindings.of(&s.owner);
        let estimate = crate::cost::estimate(s.expr.ast(), bound, &|n| seen.get(n).copied());
        if estimate <= u128::from(limits.cel_cost) {
            continue;
        }
        let rule = match s.owner {
            Owner::RuleForEach(k) | Owner::RuleVar(k, _) | Owner::Rule(k) | Owner::Entry(k) => {
                id(k)
            }
            _ => None,
        };
        let what = match &s.owner {
            Owner::PackVar(i) => pack_vars
                .get(*i)
                .map_or_else(String::new, |n| format!("pack variable {n:?}: ")),
            Owner::Fragment(n) => format!("fragment {n:?}: "),
            _ => String::new(),
        };
        out.push(at.finding(
            Lint::CelCost,
            &s.path,
            rule,
            format!(
                "{what}the estimated worst case of this expression is {estimate} CEL cost units \
                 (comprehension iterations), more than the per-expression limit of {} \
                 (--cel-cost-limit), with lists of up to {bound} elements (--max-yaml-nodes): a \
                 document with lists that long makes it a rule error; avoid nesting \
                 comprehensions over whole lists of the document",
                limits.cel_cost
            ),
        ));
    }
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

/// The position of `needle` in the scalar that starts at `start` (the scalar may be quoted or
/// a block spanning later lines); `start` when it cannot be found there.
fn locate(source: &Source, start: Pos, needle: &str) -> Pos {
    let from = source.offset_of(start);
    // A scalar holding the needle spans at most a few lines more than the needle's length.
    let window_end = source
        .text
        .get(from..)
        .and_then(|rest| rest.char_indices().nth(needle.len() * 4 + 512))
        .map_or(source.text.len(), |(i, _)| from + i);
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

/// Whether a rule file's text holds a YAML document that can load something: a line that is
/// not blank, a comment, a document marker (`---`, `...`, also followed by a comment) or a null
/// (`null`, `~`, `--- null`).
pub(crate) fn has_document(text: &str) -> bool {
    text.lines().any(|l| {
        let mut t = l.trim();
        for marker in ["---", "..."] {
            if let Some(rest) = t.strip_prefix(marker)
                && (rest.is_empty() || rest.starts_with([' ', '\t']))
            {
                t = rest.trim_start();
            }
        }
        let t = if t.starts_with('#') {
            ""
        } else {
            t.split(" #").next().unwrap_or("").trim_end()
        };
        !matches!(t, "" | "null" | "Null" | "NULL" | "~")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str =
        "apiVersion: policy.nvcre.nvidia.com/v1alpha1\nkind: RulePack\nmetadata:\n  name: p\n";

    fn run(text: &str) -> Vec<String> {
        lint(&[Source::new("rules/x.yaml", text)], None)
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
                "rules/x.yaml:8:25: error[compile]: rule a: CEL does not compile: Syntax error: no viable alternative at input '.(' (expression column 8)",
                "rules/x.yaml:13:13: error[compile]: rule c: CEL does not compile: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER} (expression column 4)",
            ]
        );
    }

    /// A table row whose id a rule or an earlier table's row has is warned about: `rules
    /// explain` would show the other one.
    #[test]
    fn a_row_id_shared_with_a_rule_or_another_row_is_ambiguous() {
        let table = |name: &str, ids: &[&str]| {
            let rows: String = ids
                .iter()
                .map(|id| format!("  - id: {id}\n    include: 'true'\n    v: 1\n"))
                .collect();
            format!(
                "apiVersion: policy.nvcre.nvidia.com/v1alpha1\nkind: Table\nmetadata:\n  name: {name}\nentries:\n{rows}"
            )
        };
        let sources = [
            Source::new(
                "rules/p.yaml",
                format!("{HEAD}rules:\n- id: r\n  validate: {{expression: 'true'}}\n"),
            ),
            Source::new("rules/a.yaml", table("a", &["x", "y"])),
            Source::new("rules/b.yaml", table("b", &["r", "x", "z"])),
        ];
        let found: Vec<String> = lint(&sources, None)
            .iter()
            .filter(|f| f.lint == Lint::AmbiguousId)
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            found,
            [
                "rules/b.yaml:6:5: warning[ambiguous-id]: entry r: row id \"r\" of table b is also the id of rule r (rules/p.yaml:6): `rules explain r` shows that one; rename the row, or explain it as b/r",
                "rules/b.yaml:9:5: warning[ambiguous-id]: entry x: row id \"x\" of table b is also the id of table a's row (rules/a.yaml:6): `rules explain x` shows that one; rename the row, or explain it as b/x",
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
                "rules/x.yaml:8:5: error[unknown-field]: rule a: unknown field `expresion`, expected one of `expression`, `message`, `messageExpression`, `fieldPath`, `fieldPathExpression`, `at`, `atExpression`",
                "rules/x.yaml:10:3: error[unknown-field]: rule b: unknown field `sevrity`, expected one of `id`, `severity`, `description`, `when`, `variables`, `forEach`, `validate`, `mutate`",
            ]
        );
    }

    #[test]
    fn yaml_errors_and_bad_documents_do_not_stop_other_files() {
        let findings: Vec<String> = lint(
            &[
                Source::new("rules/a.yaml", "key: [unclosed\n"),
                Source::new("rules/b.yaml", format!("{HEAD}extra: 1\n")),
            ],
            None,
        )
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

    /// A name nothing binds (a typo of `object`, a forEach name misspelt) is an error where it
    /// is written; namespaces of functions (`lists.range`), CEL's type names, a rule's forEach
    /// item and what comprehensions bind are not.
    #[test]
    fn identifiers_nothing_binds_are_errors() {
        assert_eq!(
            pack(
                "rules:\n  - id: r\n    forEach: {in: '[1]', as: it, index: i}\n    validate:\n      expression: objct.spec == it && nodeSelectr == i && type(it) == int && lists.range(2).all(x, x >= 0)\n"
            ),
            [
                "rules/x.yaml:9:19: error[undefined-variable]: rule r: objct is not defined here: the expression can read object, variables, params, fragments, objects, objectsByKind, it, i (and what its own comprehensions bind); a name must be one of them",
                "rules/x.yaml:9:19: error[undefined-variable]: rule r: nodeSelectr is not defined here: the expression can read object, variables, params, fragments, objects, objectsByKind, it, i (and what its own comprehensions bind); a name must be one of them"
            ]
        );
        let table = "apiVersion: policy.nvcre.nvidia.com/v1alpha1\nkind: Table\nmetadata: {name: t}\nentries:\n- id: e\n  include: object.kind == 'x'\n";
        assert_eq!(
            run(table),
            [
                "rules/x.yaml:6:12: error[undefined-variable]: entry e: object is not defined here: the expression can read params, fragments (and what its own comprehensions bind); a name must be one of them"
            ]
        );
    }

    /// A function or method the interpreter does not know (a typo, a library that is not
    /// available) is refused when the rules load, also behind a `||` that would hide it until
    /// a document reaches it; known functions of every kind are not: the standard library,
    /// its extensions, namespaced ones, ours, methods on a comprehension's variable or a
    /// pack variable.
    #[test]
    fn calls_of_functions_the_interpreter_does_not_know_are_errors() {
        assert_eq!(
            pack(
                "variables:\n  - {name: n, expression: \"'a'\"}\nrules:\n  - id: r\n    forEach: {in: '[\"x\"]', as: it}\n    validate:\n      expression: size(object) > 0 || sizee(object) == 0 || sets.contains([1], [1]) || quantity('1').isBiggerThan(quantity('2')) || lists.nope(1) == 1 || it.startsWith('x') && variables.n.matches('a') && lists.range(2).all(x, string(x) != '') && optional.of(1).hasValue() && format.labelValue().validate('a').hasValue() && strings.quote('a') != '' && object.?spec.orValue(1) == 1\n"
            ),
            [
                "rules/x.yaml:11:19: error[compile]: rule r: sizee is not a function or method of the CEL library here (the standard library, its strings, lists and optional extensions, and ours: see the rules documentation); the expression would fail wherever it reaches the call",
                "rules/x.yaml:11:19: error[compile]: rule r: sets.contains is not a function of the CEL library here, and sets is not a name the expression can read (the Kubernetes sets, URL, IP and semver libraries are not available)",
                "rules/x.yaml:11:19: error[compile]: rule r: isBiggerThan is not a function or method of the CEL library here (the standard library, its strings, lists and optional extensions, and ours: see the rules documentation); the expression would fail wherever it reaches the call",
                "rules/x.yaml:11:19: error[compile]: rule r: nope is not a function or method of the CEL library here (the standard library, its strings, lists and optional extensions, and ours: see the rules documentation); the expression would fail wherever it reaches the call",
            ]
        );
    }

    /// A `fragments.x` read that names no fragment of the file, `has()` and `in` tests
    /// included (a typo there switches a branch off for good), is an error where it is read.
    #[test]
    fn fragment_reads_that_name_no_fragment_are_errors() {
        let text = "apiVersion: policy.nvcre.nvidia.com/v1alpha1\nkind: Table\nmetadata: {name: t}\nfragments:\n  read: [b]\nentries:\n- id: e\n  include: \"has(fragments.raed) || 'reed' in fragments\"\n  args: [{$splice: '${{ fragments.read }}'}]\n";
        assert_eq!(
            run(text),
            [
                "rules/x.yaml:8:12: error[undefined-variable]: entry e: fragments.raed names no fragment of this file (its fragments: read)",
                "rules/x.yaml:8:12: error[undefined-variable]: entry e: fragments.reed names no fragment of this file (its fragments: read)"
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

    #[test]
    fn expressions_whose_estimated_cost_exceeds_the_limit() {
        assert_eq!(
            pack(
                "variables:\n- {name: keys, expression: \"['a', 'b']\"}\nrules:\n- id: r\n  validate:\n    expression: object.spec.env.all(a, object.spec.env.all(b, a.name != b.name || a == b))\n- id: linear\n  validate:\n    expression: object.spec.jobs.all(j, j.containers.all(c, variables.keys.all(k, k in c)))\n"
            ),
            [
                "rules/x.yaml:10:17: warning[cel-cost]: rule r: the estimated worst case of this expression is 62500250000 CEL cost units (comprehension iterations), more than the per-expression limit of 1000000 (--cel-cost-limit), with lists of up to 250000 elements (--max-yaml-nodes): a document with lists that long makes it a rule error; avoid nesting comprehensions over whole lists of the document"
            ]
        );
    }

    #[test]
    fn a_file_of_markers_comments_and_nulls_has_no_document() {
        for text in [
            "",
            "# c\n",
            "---\n...\n",
            "--- # c\n...\n",
            "null\n",
            "~\n",
            "--- null\n",
            "---\nnull # c\n",
        ] {
            assert!(!has_document(text), "{text:?}");
        }
        for text in [
            "a: 1\n",
            "--- {a: 1}\n",
            "---\nkind: Table\n",
            "nullable: x\n",
        ] {
            assert!(has_document(text), "{text:?}");
        }
    }

    #[test]
    fn an_empty_file_and_a_missing_table_of_a_whole_set_are_errors()
    -> Result<(), Box<dyn std::error::Error>> {
        let empty = Source::new("rules/empty.yaml", "# truncated\n---\n");
        let kept = Source::new(
            "rules/kept.yaml",
            "apiVersion: policy.nvcre.nvidia.com/v1alpha1\nkind: Table\nmetadata: {name: kept}\nentries: []\n",
        );
        let contract = crate::contract::Contract::new()
            .table("kept", "a table kept", serde_json::json!({}), None)
            .table("t", "a table", serde_json::json!({}), None);
        // Packs alone (none of the tables): a part of a set, no missing table.
        assert!(
            lint(std::slice::from_ref(&empty), Some(&contract))
                .iter()
                .all(|f| f.lint != Lint::MissingTable)
        );
        let found: Vec<String> = lint(&[empty, kept], Some(&contract))
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            found,
            [
                "rules/empty.yaml:1:1: error[empty-file]: the rule file has no document, so it loads nothing: an emptied or truncated file drops its packs and tables without a word; restore it, or delete it",
                "rules: error[missing-table]: no rule file defines table \"t\" (a table); the pipeline renders it, so a set used whole (--rules, a controller's mounted rules) is refused without it",
            ]
        );
        Ok(())
    }
}
