//! Evaluation of a compiled pack over one document, and rendering of tables.
//!
//! CEL sees `object` (the document, as mutated so far), `params` (caller data), `variables`
//! (pack variables, then rule variables) and `fragments` (the pack's rendered fragments). Rules
//! run in file order; a mutation is visible to every later rule. A rule whose expression fails to
//! evaluate yields an error finding (fail closed), never a pass.

use std::collections::BTreeMap;

use kube_cel::cel::Value as Cel;
use serde_json::{Map, Value};

use crate::error::Error;
use crate::expr::{Expr, Fragments, Scope, VARIABLE_PREFIX};
use crate::finding::{Finding, Severity};
use crate::pack::{CompiledPack, FieldPathSpec, Message, Mutation, Rule, Table};
use crate::patch::{self, MergeNamedLists};
use crate::path::FieldPath;
use crate::source::SpanIndex;

/// Where the evaluated document came from, for findings.
#[derive(Debug, Clone, Copy)]
pub struct Origin<'a> {
    /// File name (or `<stdin>`, or a rendered-output name).
    pub file: &'a str,
    /// 0-based document index.
    pub document: usize,
    /// Spans of the document, when it was read from text.
    pub spans: Option<&'a SpanIndex>,
}

/// The result of running one pack on one document.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// False when the pack's `match` did not select the document (nothing ran).
    pub matched: bool,
    /// The document after every mutation.
    pub value: Value,
    /// Findings in rule order.
    pub findings: Vec<Finding>,
}

impl Outcome {
    /// True when any finding has `Severity::Error`.
    pub fn has_errors(&self) -> bool {
        self.findings.iter().any(|f| f.severity == Severity::Error)
    }
}

struct Run<'a> {
    pack: &'a CompiledPack,
    origin: Origin<'a>,
    params: &'a Value,
    doc: Value,
    findings: Vec<Finding>,
}

impl CompiledPack {
    /// Runs the pack on `doc`.
    ///
    /// # Errors
    /// [`Error::Patch`] when a mutation cannot be applied (the engine could not do its job).
    pub fn evaluate(
        &self,
        doc: &Value,
        origin: Origin<'_>,
        params: &Value,
    ) -> Result<Outcome, Error> {
        let mut run = Run {
            pack: self,
            origin,
            params,
            doc: doc.clone(),
            findings: Vec::new(),
        };
        if !self.matcher.matches_resource(doc) {
            return Ok(Outcome {
                matched: false,
                value: run.doc,
                findings: Vec::new(),
            });
        }
        let base = run.base_scope();
        for (name, cond) in &self.matcher.conditions {
            match cond.eval_bool(&base) {
                Ok(true) => {}
                Ok(false) => {
                    return Ok(Outcome {
                        matched: false,
                        value: run.doc,
                        findings: Vec::new(),
                    });
                }
                Err(e) => {
                    let id = format!("{}/matchConditions/{name}", self.name);
                    run.findings.push(run.finding(
                        &id,
                        Severity::Error,
                        0,
                        format!("match condition {name:?} could not be evaluated: {e}"),
                        None,
                    ));
                    return Ok(Outcome {
                        matched: true,
                        value: run.doc,
                        findings: run.findings,
                    });
                }
            }
        }
        let (mut scope, mut vars) = run.pack_scope();
        for rule in &self.rules {
            if run.rule(rule, &scope, &vars)? {
                (scope, vars) = run.pack_scope();
            }
        }
        Ok(Outcome {
            matched: true,
            value: run.doc,
            findings: run.findings,
        })
    }
}

impl Run<'_> {
    fn base_scope(&self) -> Scope {
        let mut s = Scope::new();
        s.bind("object", &self.doc);
        // No params is an empty map, so `params.?x.orValue(d)` works everywhere.
        if self.params.is_null() {
            s.bind("params", &Value::Object(Map::new()));
        } else {
            s.bind("params", self.params);
        }
        s
    }

    /// `object`, `params`, pack `variables` (each sees the earlier ones) and `fragments`.
    /// A variable that fails to evaluate is bound to null; rules that read it then fail closed.
    fn pack_scope(&self) -> (Scope, BTreeMap<String, Cel>) {
        let mut s = self.base_scope();
        let vars = eval_vars(&mut s, &self.pack.variables, BTreeMap::new());
        s.bind_local("variables", vars_value(&vars));
        let mut frags = Map::new();
        let none = Fragments::new();
        for (name, t) in &self.pack.fragments {
            frags.insert(name.clone(), t.render(&s, &none).unwrap_or(Value::Null));
        }
        s.bind("fragments", &Value::Object(frags));
        (s, vars)
    }

    /// Runs one rule; returns true when it mutated the document.
    fn rule(
        &mut self,
        rule: &Rule,
        scope: &Scope,
        pack_vars: &BTreeMap<String, Cel>,
    ) -> Result<bool, Error> {
        let items: Vec<(Option<Cel>, Option<Cel>)> = match &rule.for_each {
            None => vec![(None, None)],
            Some((expr, _, _)) => match expr.eval(scope) {
                Ok(Cel::List(l)) => l
                    .iter()
                    .enumerate()
                    .map(|(i, v)| {
                        (
                            Some(v.clone()),
                            Some(Cel::Int(i64::try_from(i).unwrap_or(i64::MAX))),
                        )
                    })
                    .collect(),
                Ok(Cel::Map(m)) => {
                    // Maps iterate over their keys, sorted, so findings come in a stable order.
                    let mut keys: Vec<Cel> = m.map.keys().map(|k| Cel::from(k.clone())).collect();
                    keys.sort_by_key(|k| format!("{k:?}"));
                    keys.into_iter().map(|k| (Some(k), None)).collect()
                }
                Ok(Cel::Null) => Vec::new(),
                Ok(other) => {
                    self.eval_error(
                        rule,
                        &format!(
                            "forEach.in must be a list or map, got {}",
                            crate::expr::type_name(&other)
                        ),
                    );
                    return Ok(false);
                }
                Err(e) => {
                    self.eval_error(rule, &format!("forEach.in: {e}"));
                    return Ok(false);
                }
            },
        };
        let mut mutated = false;
        let mut scope = scope.clone();
        for (item, index) in items {
            let mut s = scope.clone();
            if let (Some((_, var, idx_var)), Some(item)) = (&rule.for_each, item) {
                s.bind_local(var, item);
                if let (Some(iv), Some(index)) = (idx_var, index) {
                    s.bind_local(iv, index);
                }
            }
            if !rule.variables.is_empty() {
                let vars = eval_vars(&mut s, &rule.variables, pack_vars.clone());
                s.bind_local("variables", vars_value(&vars));
            }
            if let Some(when) = &rule.when {
                match when.eval_bool(&s) {
                    Ok(true) => {}
                    Ok(false) => continue,
                    Err(e) => {
                        self.eval_error(rule, &format!("when: {e}"));
                        continue;
                    }
                }
            }
            if let Some(v) = &rule.validate {
                match v.expression.eval_bool(&s) {
                    Ok(true) => {}
                    Ok(false) => {
                        let message = match &v.message {
                            Message::Static(m) => m.clone(),
                            Message::Expr(e) => match e.eval(&s) {
                                Ok(Cel::String(m)) => m.to_string(),
                                Ok(other) => format!("{other:?}"),
                                Err(err) => format!(
                                    "rule {} failed; its messageExpression could not be evaluated: {err}",
                                    rule.id
                                ),
                            },
                        };
                        let path = field_path(v.field_path.as_ref(), &s);
                        self.findings.push(self.finding(
                            &rule.id,
                            rule.severity,
                            rule.pos.line,
                            message,
                            path,
                        ));
                    }
                    Err(e) => self.eval_error(rule, &e),
                }
            }
            for m in &rule.mutate {
                let none = Fragments::new();
                let applied = match m {
                    Mutation::Merge { path, value } => value
                        .render(&s, &none)
                        .map(|v| patch::merge_at_path(&mut self.doc, path, &v, &MergeNamedLists)),
                    Mutation::Insert { path, values, end } => {
                        values.render(&s, &none).map(|v| match v {
                            Value::Array(items) => {
                                patch::insert_list(&mut self.doc, path, items, *end)
                            }
                            other => patch::insert_list(&mut self.doc, path, vec![other], *end),
                        })
                    }
                    Mutation::JsonPatch(ops) => ops
                        .render(&s, &none)
                        .map(|v| patch::json_patch(&mut self.doc, &v)),
                };
                match applied {
                    Ok(result) => result?,
                    Err(e) => {
                        self.eval_error(rule, &e);
                        continue;
                    }
                }
                mutated = true;
            }
            if mutated {
                // Later items and rules see the mutated document.
                s.bind("object", &self.doc);
                scope.bind("object", &self.doc);
            }
        }
        Ok(mutated)
    }

    fn eval_error(&mut self, rule: &Rule, err: &str) {
        let message = format!("rule {} could not be evaluated: {err}", rule.id);
        self.findings
            .push(self.finding(&rule.id, Severity::Error, rule.pos.line, message, None));
    }

    fn finding(
        &self,
        rule_id: &str,
        severity: Severity,
        rule_line: usize,
        message: String,
        path: Option<FieldPath>,
    ) -> Finding {
        let pos = path
            .as_ref()
            .and_then(|p| self.origin.spans.and_then(|s| s.lookup(p)));
        Finding {
            rule_id: rule_id.to_string(),
            pack: self.pack.name.clone(),
            severity,
            message,
            file: self.origin.file.to_string(),
            document: self.origin.document,
            field_path: path.map(|p| p.to_string()),
            line: pos.map(|p| p.line),
            column: pos.map(|p| p.column),
            rule_file: self.pack.source.name.clone(),
            rule_line,
            stage: self.pack.stage.clone(),
        }
    }
}

fn field_path(spec: Option<&FieldPathSpec>, scope: &Scope) -> Option<FieldPath> {
    match spec? {
        FieldPathSpec::Static(p) => Some(p.clone()),
        FieldPathSpec::Expr(e) => match e.eval(scope) {
            Ok(Cel::String(s)) => FieldPath::parse(&s).ok(),
            _ => None,
        },
    }
}

fn eval_vars(
    scope: &mut Scope,
    vars: &[(String, Expr)],
    mut acc: BTreeMap<String, Cel>,
) -> BTreeMap<String, Cel> {
    for (name, v) in &acc {
        scope.bind_local(&format!("{VARIABLE_PREFIX}{name}"), v.clone());
    }
    for (name, expr) in vars {
        let v = expr.eval(scope).unwrap_or(Cel::Null);
        scope.bind_local(&format!("{VARIABLE_PREFIX}{name}"), v.clone());
        acc.insert(name.clone(), v);
    }
    acc
}

fn vars_value(vars: &BTreeMap<String, Cel>) -> Cel {
    let map: std::collections::HashMap<String, Cel> =
        vars.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    Cel::from(map)
}

impl Table {
    /// Renders every entry whose `include` holds, with `params` bound as `params` and the
    /// table's fragments (rendered first) as `fragments` and `{$fragment: name}`.
    ///
    /// Returns `(entry id, rendered body)` in table order.
    ///
    /// # Errors
    /// [`Error::Pack`] naming the table file, the entry id and the failing expression.
    pub fn render(&self, params: &Value) -> Result<Vec<(String, Value)>, Error> {
        self.render_entries(params, true)
    }

    /// Renders every entry, ignoring `include` (to list a table's rows).
    ///
    /// # Errors
    /// As [`Table::render`].
    pub fn render_all(&self, params: &Value) -> Result<Vec<(String, Value)>, Error> {
        self.render_entries(params, false)
    }

    fn render_entries(
        &self,
        params: &Value,
        honor_include: bool,
    ) -> Result<Vec<(String, Value)>, Error> {
        let key = (honor_include, params.to_string());
        if let Some(rows) = self.cache.lock().ok().and_then(|c| c.get(&key).cloned()) {
            return Ok(rows);
        }
        let rows = self.render_uncached(params, honor_include)?;
        if let Ok(mut c) = self.cache.lock() {
            // Bounded: parameters that differ per document (the run name) must not grow it.
            if c.len() >= 256 {
                c.clear();
            }
            c.insert(key, rows.clone());
        }
        Ok(rows)
    }

    fn render_uncached(
        &self,
        params: &Value,
        honor_include: bool,
    ) -> Result<Vec<(String, Value)>, Error> {
        let mut scope = Scope::new();
        scope.bind("params", params);
        let mut frags = Fragments::new();
        for (name, t) in &self.fragments {
            scope.bind(
                "fragments",
                &Value::Object(frags.clone().into_iter().collect()),
            );
            let v = t.render(&scope, &frags).map_err(|message| Error::Pack {
                file: self.source.name.clone(),
                pos: None,
                rule: None,
                message: format!("fragment {name}: {message}"),
            })?;
            frags.insert(name.clone(), v);
        }
        scope.bind(
            "fragments",
            &Value::Object(frags.clone().into_iter().collect()),
        );
        let mut out = Vec::new();
        for e in &self.entries {
            let err = |message: String| Error::Pack {
                file: self.source.name.clone(),
                pos: Some(e.pos),
                rule: Some(e.id.clone()),
                message,
            };
            if let Some(inc) = e.include.as_ref().filter(|_| honor_include) {
                if !inc
                    .eval_bool(&scope)
                    .map_err(|m| err(format!("include: {m}")))?
                {
                    continue;
                }
            }
            out.push((e.id.clone(), e.body.render(&scope, &frags).map_err(err)?));
        }
        Ok(out)
    }
}
