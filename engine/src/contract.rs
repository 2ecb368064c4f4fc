//! A caller's declared pipeline contract, checked when rules load.
//!
//! The engine runs whatever stages and renders whatever tables its caller asks for; the caller
//! knows which exist. A [`Contract`] declares them: the stages (each with the `params` it passes
//! to its packs) and the tables (each with a JSON Schema for its rows and, optionally, the
//! params it is rendered with). Loading with a contract ([`RuleSet::load`](crate::RuleSet::load))
//! refuses, with file, line and column:
//!
//! - a pack whose `stage` is not declared, or that has no `stage`;
//! - a `Table` whose name is not declared;
//! - a table row (the entry minus `id` and `include`) that does not validate against the row
//!   schema. Templated values (`${{ … }}` strings, `{$splice: …}` and `{$if: …}` nodes) are
//!   only known once rendered: errors at or under them are dropped, while keys beside them are
//!   still checked. A `{$fragment: name}` is replaced by the fragment before validation (a list
//!   fragment used as a list element splices in), so the fragment's own keys are checked too and
//!   errors point into the fragment. A required key missing from a mapping that has an unknown
//!   key is not reported apart (the unknown key is most likely its misspelling);
//! - a `params.<name>` read (`params.x`, `params.?x`, `params['x']`) that the pack's stage does
//!   not pass, or, when the table declares its params, that the table is not rendered with.
//!   Reads are found in each expression's parsed AST;
//! - a CEL field of a table row (declared with [`Contract::cel_field`], e.g. the `when.expression`
//!   of an override row, evaluated later by the caller with its own variables) that does not
//!   compile or reads a name the caller does not bind. Templated values are not checked.
//!
//! A contract may also declare document kinds besides `RulePack` and `Table`
//! ([`Contract::document_kind`]): documents of such a kind are kept as written in
//! [`RuleSet::documents`](crate::RuleSet::documents) after the caller's check passes; its problems
//! refuse the set like any other, at the field they name.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::error::{ContractViolation, Error};
use crate::expr::Expr;
use crate::pack::{CompiledPack, Problem, ProblemKind, Table};
use crate::path::FieldPath;
use crate::sites::{Owner, free_identifiers, pack_sites, reads, table_sites};
use crate::source::{Document, escape_pointer};

/// One stage of a [`Contract`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageContract {
    /// The name packs give as `stage:`.
    pub name: String,
    /// What the stage is for (shown by tools).
    pub description: String,
    /// The `params` keys the stage passes to its packs.
    pub params: Vec<String>,
    /// True when the stage binds [`OBJECTS`](crate::OBJECTS), the other documents of the
    /// document's input; a pack of any other stage that reads it is refused.
    pub objects: bool,
}

/// One table of a [`Contract`].
#[derive(Clone)]
pub struct TableContract {
    /// `metadata.name` of the table.
    pub name: String,
    /// What the table is for.
    pub description: String,
    /// The JSON Schema of one row (an entry without `id` and `include`).
    pub row_schema: Value,
    /// The `params` keys the table is rendered with; `None` when not declared (not checked).
    pub params: Option<Vec<String>>,
    /// Row fields that hold CEL the caller evaluates itself, with the variables it binds.
    pub cel_fields: Vec<CelField>,
    validator: Arc<RowValidator>,
}

/// A table's row schema, compiled into a validator on first use: most runs read a few
/// tables, and compiling every schema was a fifth of a small `check`'s start-up.
pub(crate) struct RowValidator {
    table: String,
    schema: Value,
    compiled: std::sync::OnceLock<Result<jsonschema::Validator, String>>,
}

impl std::fmt::Debug for RowValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RowValidator")
            .field("table", &self.table)
            .finish_non_exhaustive()
    }
}

impl RowValidator {
    fn new(table: &str, schema: Value) -> RowValidator {
        RowValidator {
            table: table.to_string(),
            schema,
            compiled: std::sync::OnceLock::new(),
        }
    }

    /// The compiled validator.
    ///
    /// # Errors
    /// [`Error::InvalidContract`] when the schema is not a valid JSON Schema.
    pub(crate) fn get(&self) -> Result<&jsonschema::Validator, Error> {
        self.compiled
            .get_or_init(|| {
                jsonschema::options()
                    .should_validate_formats(true)
                    .with_format(REGEX_FORMAT, |text: &str| {
                        crate::go_regex::compile(text).is_ok()
                    })
                    .build(&self.schema)
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|e| {
                Error::InvalidContract(format!("row schema of table {:?}: {e}", self.table))
            })
    }
}

/// A row field of a table that holds a CEL expression the caller evaluates after rendering
/// (not a `${{ … }}` template), and the only identifiers that expression may read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CelField {
    /// JSON pointer of the field inside a row, e.g. `/when/expression`.
    pub pointer: String,
    /// The identifiers the caller binds when it evaluates the field.
    pub variables: Vec<String>,
}

impl std::fmt::Debug for TableContract {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableContract")
            .field("name", &self.name)
            .field("params", &self.params)
            .field("cel_fields", &self.cel_fields)
            .finish_non_exhaustive()
    }
}

/// The stages and tables a caller runs; see the module docs for what loading checks.
///
/// ```
/// use nvcre_engine::{Contract, RuleSet, Source};
///
/// let contract = Contract::new()
///     .stage("admission", "first checks", &[])
///     .table("sizes", "sizes by name", serde_json::json!({
///         "type": "object",
///         "properties": {"size": {"type": "integer"}},
///         "additionalProperties": false
///     }), None);
/// contract.compile_row_schemas()?;
/// let bad = Source::new("rules/p.yaml", "\
/// apiVersion: policy.nvcre.nvidia.com/v1alpha1
/// kind: RulePack
/// metadata: {name: p}
/// stage: admision
/// rules:
///   - id: r
///     validate: {expression: 'true'}
/// ");
/// let err = RuleSet::load(&[bad], Some(&contract)).unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "rule pack error: rules/p.yaml:4:8: unknown stage \"admision\"; known stages: admission"
/// );
/// # Ok::<(), nvcre_engine::Error>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct Contract {
    stages: Vec<StageContract>,
    tables: Vec<TableContract>,
    kinds: Vec<KindContract>,
    require_every_table: bool,
    complete_when_whole: bool,
}

/// A problem a [`KindContract`] check found in one document: the field path it is at
/// (`spec.patterns.trainingStep.regex`; `""` for the document) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentProblem {
    /// Dotted field path of the offending node, as [`FieldPath::parse`] reads it.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

/// The check a caller runs on each document of a [`KindContract`]'s kind when rules load.
pub type DocumentCheck = Arc<dyn Fn(&Document) -> Vec<DocumentProblem> + Send + Sync>;

/// A document kind, besides `RulePack` and `Table`, that a rule set may hold for its caller
/// (e.g. a `LogProfile`): the engine keeps such documents as they are in
/// [`RuleSet::documents`](crate::RuleSet::documents) and runs the caller's check on each when
/// the set loads, so a bad one refuses the whole set with its file, line and column.
#[derive(Clone)]
pub struct KindContract {
    /// The `kind:` of the documents.
    pub kind: String,
    /// What the documents are for.
    pub description: String,
    check: DocumentCheck,
}

impl std::fmt::Debug for KindContract {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KindContract")
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

impl Contract {
    /// An empty contract (no stage, no table: every pack and table is refused).
    pub fn new() -> Contract {
        Contract::default()
    }

    /// When `yes`, [`RuleSet::load`](crate::RuleSet::load) refuses a set in which a declared
    /// table is defined by no rule file (a set that replaces a caller's built-in rules whole
    /// must not lack a table the pipeline renders). Fixtures that load one table turn it off.
    ///
    /// This is disabled by default.
    pub fn require_every_table(mut self, yes: bool) -> Contract {
        self.require_every_table = yes;
        self
    }

    /// True when [`Contract::require_every_table`] is on.
    pub fn requires_every_table(&self) -> bool {
        self.require_every_table
    }

    /// When `yes`, a set that defines any of the declared tables is taken as a whole set (one
    /// that replaces the built-in rules) and loaded as [`Contract::require_every_table`]
    /// loads every set: refused without a declared table, without a pack of a declared stage,
    /// or with a file that holds no document. A set that defines none (packs alone) is loaded
    /// as it is.
    ///
    /// This is disabled by default.
    pub fn complete_when_whole(mut self, yes: bool) -> Contract {
        self.complete_when_whole = yes;
        self
    }

    /// Whether a set that defines the tables `defined` tells (by name) must be complete: see
    /// [`Contract::require_every_table`] and [`Contract::complete_when_whole`].
    pub fn requires_complete(&self, defined: impl Fn(&str) -> bool) -> bool {
        self.require_every_table
            || (self.complete_when_whole && self.tables.iter().any(|t| defined(&t.name)))
    }

    /// Declares a stage and the params it passes.
    pub fn stage(mut self, name: &str, description: &str, params: &[&str]) -> Contract {
        self.stages.push(StageContract {
            name: name.to_string(),
            description: description.to_string(),
            params: params.iter().map(|p| (*p).to_string()).collect(),
            objects: false,
        });
        self
    }

    /// Declares a stage like [`Contract::stage`] whose packs also see
    /// [`OBJECTS`](crate::OBJECTS): the caller evaluates them with
    /// [`CompiledPack::evaluate_in`](crate::CompiledPack::evaluate_in) and the documents of the
    /// same input.
    pub fn stage_with_objects(self, name: &str, description: &str, params: &[&str]) -> Contract {
        let mut c = self.stage(name, description, params);
        if let Some(s) = c.stages.last_mut() {
            s.objects = true;
        }
        c
    }

    /// Declares a table with the JSON Schema of its rows and, when `Some`, the params it is
    /// rendered with. The schema is compiled when a row is first checked against it: an
    /// invalid one is then an [`Error::InvalidContract`] ([`Contract::compile_row_schemas`]
    /// compiles them all now, for a test).
    #[must_use]
    pub fn table(
        mut self,
        name: &str,
        description: &str,
        row_schema: Value,
        params: Option<&[&str]>,
    ) -> Contract {
        let validator = RowValidator::new(name, row_schema.clone());
        self.tables.push(TableContract {
            name: name.to_string(),
            description: description.to_string(),
            row_schema,
            params: params.map(|ps| ps.iter().map(|p| (*p).to_string()).collect()),
            cel_fields: Vec::new(),
            validator: Arc::new(validator),
        });
        self
    }

    /// Declares that rows of `table` hold, at JSON pointer `pointer` (e.g. `/when/expression`),
    /// a CEL expression the caller evaluates with `variables` bound: loading refuses one that
    /// does not compile or reads any other identifier.
    ///
    /// # Errors
    /// [`Error::InvalidContract`] when `table` is not declared (yet).
    pub fn cel_field(
        mut self,
        table: &str,
        pointer: &str,
        variables: &[&str],
    ) -> Result<Contract, Error> {
        let Some(t) = self.tables.iter_mut().find(|t| t.name == table) else {
            return Err(Error::InvalidContract(format!(
                "CEL field {pointer:?} of undeclared table {table:?}"
            )));
        };
        t.cel_fields.push(CelField {
            pointer: pointer.to_string(),
            variables: variables.iter().map(|v| (*v).to_string()).collect(),
        });
        Ok(self)
    }

    /// Declares a document kind the set may hold beside packs and tables, and the check each
    /// such document must pass when the set loads (see [`KindContract`]).
    pub fn document_kind(
        mut self,
        kind: &str,
        description: &str,
        check: impl Fn(&Document) -> Vec<DocumentProblem> + Send + Sync + 'static,
    ) -> Contract {
        self.kinds.push(KindContract {
            kind: kind.to_string(),
            description: description.to_string(),
            check: Arc::new(check),
        });
        self
    }

    /// The declared document kinds, in declaration order.
    pub fn kinds(&self) -> &[KindContract] {
        &self.kinds
    }

    /// The problems of `doc`, a document of a declared kind (none found unless `check`);
    /// `None` when its kind is not declared.
    pub(crate) fn check_document(
        &self,
        doc: &Document,
        kind: &str,
        check: bool,
    ) -> Option<Vec<Problem>> {
        let declared = self.kinds.iter().find(|k| k.kind == kind)?;
        if !check {
            return Some(Vec::new());
        }
        let problems = (declared.check)(doc)
            .into_iter()
            .map(|p| {
                let pos = FieldPath::parse(&p.path)
                    .ok()
                    .and_then(|path| doc.spans.lookup(&path));
                Problem {
                    kind: ProblemKind::Compile,
                    error: Error::Pack {
                        file: doc.source.name.clone(),
                        pos,
                        rule: None,
                        message: p.message,
                    },
                }
            })
            .collect();
        Some(problems)
    }

    /// The declared stages, in declaration order.
    pub fn stages(&self) -> &[StageContract] {
        &self.stages
    }

    /// The declared tables, in declaration order.
    pub fn tables(&self) -> &[TableContract] {
        &self.tables
    }

    fn known_stages(&self) -> String {
        let names: Vec<&str> = self.stages.iter().map(|s| s.name.as_str()).collect();
        names.join(", ")
    }

    fn known_tables(&self) -> String {
        let names: Vec<&str> = self.tables.iter().map(|s| s.name.as_str()).collect();
        names.join(", ")
    }

    /// The contract problems of a compiled pack read from `doc`.
    pub(crate) fn check_pack(&self, doc: &Document, pack: &CompiledPack, out: &mut Vec<Problem>) {
        let Some(stage) = &pack.stage else {
            out.push(violation(
                doc,
                ContractViolation::MissingStage,
                &FieldPath::root().key("kind"),
                None,
                format!(
                    "pack {:?} has no stage; known stages: {}",
                    pack.name,
                    self.known_stages()
                ),
            ));
            return;
        };
        let Some(declared) = self.stages.iter().find(|s| &s.name == stage) else {
            out.push(violation(
                doc,
                ContractViolation::UnknownStage,
                &FieldPath::root().key("stage"),
                None,
                format!(
                    "unknown stage {stage:?}; known stages: {}",
                    self.known_stages()
                ),
            ));
            return;
        };
        let passes = if declared.params.is_empty() {
            "it passes no params".to_string()
        } else {
            format!("it passes {}", declared.params.join(", "))
        };
        for site in pack_sites(pack) {
            let rule = match site.owner {
                Owner::RuleForEach(k) | Owner::RuleVar(k, _) | Owner::Rule(k) => pack
                    .rules
                    .iter()
                    .find(|r| r.index == k)
                    .map(|r| r.id.as_str()),
                _ => None,
            };
            let unbound = (!declared.objects)
                .then(|| {
                    free_identifiers(site.expr)
                        .into_iter()
                        .find(|i| i == crate::OBJECTS || i == crate::OBJECTS_BY_KIND)
                })
                .flatten();
            if let Some(name) = unbound {
                let binding: Vec<&str> = self
                    .stages
                    .iter()
                    .filter(|s| s.objects)
                    .map(|s| s.name.as_str())
                    .collect();
                out.push(violation(
                    doc,
                    ContractViolation::UnboundObjects,
                    &site.path,
                    rule,
                    format!(
                        "{name} is not bound in stage {stage:?}; stages that bind it: {}",
                        if binding.is_empty() {
                            "none".to_string()
                        } else {
                            binding.join(", ")
                        }
                    ),
                ));
            }
            for p in reads(site.expr).params {
                if declared.params.contains(&p) {
                    continue;
                }
                out.push(violation(
                    doc,
                    ContractViolation::UndeclaredParam,
                    &site.path,
                    rule,
                    format!("params.{p} is not passed to stage {stage:?} ({passes})"),
                ));
            }
        }
    }

    /// The contract problems of a compiled table read from `doc`.
    /// Compiles every table's row schema (otherwise compiled on first use).
    ///
    /// # Errors
    /// [`Error::InvalidContract`] for the first schema that is not a valid JSON Schema.
    pub fn compile_row_schemas(&self) -> Result<(), Error> {
        for t in &self.tables {
            t.validator.get()?;
        }
        Ok(())
    }

    /// The row schema's validator of table `name`, when the contract declares it.
    pub(crate) fn row_validator(&self, name: &str) -> Option<Arc<RowValidator>> {
        self.tables
            .iter()
            .find(|t| t.name == name)
            .map(|t| t.validator.clone())
    }

    pub(crate) fn check_table(&self, doc: &Document, table: &Table, out: &mut Vec<Problem>) {
        let Some(declared) = self.tables.iter().find(|t| t.name == table.name) else {
            out.push(violation(
                doc,
                ContractViolation::UnknownTable,
                &FieldPath::root().key("metadata").key("name"),
                None,
                format!(
                    "unknown table {:?}; known tables: {}",
                    table.name,
                    self.known_tables()
                ),
            ));
            return;
        };
        if let Some(params) = &declared.params {
            for site in table_sites(table) {
                for p in reads(site.expr).params {
                    if params.contains(&p) {
                        continue;
                    }
                    let rule = table.owner_id(&site.owner);
                    out.push(violation(
                        doc,
                        ContractViolation::UndeclaredParam,
                        &site.path,
                        rule,
                        format!(
                            "params.{p} is not a param of table {:?} (it is rendered with {})",
                            table.name,
                            if params.is_empty() {
                                "no params".to_string()
                            } else {
                                params.join(", ")
                            }
                        ),
                    ));
                }
            }
        }
        let empty = Map::new();
        let frags = doc
            .value
            .get("fragments")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        for entry in &table.entries {
            let base = FieldPath::root().key("entries").index(entry.index);
            let Some(raw) = doc
                .value
                .get("entries")
                .and_then(|e| e.get(entry.index))
                .and_then(Value::as_object)
            else {
                continue;
            };
            let mut body = raw.clone();
            body.remove("id");
            body.remove("include");
            let mut inst = Instance {
                frags,
                origins: HashMap::new(),
            };
            let value = inst.build(&Value::Object(body), String::new(), base, 0);
            let validator = match declared.validator.get() {
                Ok(v) => v,
                Err(e) => {
                    out.push(Problem {
                        kind: ProblemKind::Contract,
                        error: e,
                    });
                    return;
                }
            };
            let errors: Vec<_> = validator.iter_errors(&value).collect();
            // An object with an unknown key misses a required one mostly because the key is
            // misspelled: the unknown key alone is reported.
            let misspelled: Vec<&str> = errors
                .iter()
                .filter(|e| {
                    matches!(
                        e.kind(),
                        jsonschema::error::ValidationErrorKind::AdditionalProperties { .. }
                    )
                })
                .map(|e| e.instance_path().as_str())
                .collect();
            for e in &errors {
                if matches!(
                    e.kind(),
                    jsonschema::error::ValidationErrorKind::Required { .. }
                ) && misspelled.contains(&e.instance_path().as_str())
                {
                    continue;
                }
                inst.report(doc, declared, &entry.id, e, out);
            }
            for field in &declared.cel_fields {
                inst.check_cel(doc, &value, field, &entry.id, out);
            }
        }
    }
}

/// Where a node of the validated row came from, and whether its value is known before
/// rendering.
struct Origin {
    path: FieldPath,
    /// A `${{ … }}` string, a `$if`/`$splice` node or an unknown fragment: not checked.
    templated: bool,
    /// A list with a `$splice` item: its length is unknown.
    spliced: bool,
}

/// A table row as validated: fragments inlined, with the origin of every node.
struct Instance<'a> {
    frags: &'a Map<String, Value>,
    origins: HashMap<String, Origin>,
}

/// Fragments that insert fragments are followed this deep (a cycle stops here).
const MAX_FRAGMENT_DEPTH: usize = 8;

fn single_key<'v>(v: &'v Value, key: &str) -> Option<&'v Value> {
    let m = v.as_object()?;
    if m.len() == 1 { m.get(key) } else { None }
}

impl<'a> Instance<'a> {
    fn origin(&mut self, ptr: String, path: FieldPath, templated: bool) {
        self.origins.insert(
            ptr,
            Origin {
                path,
                templated,
                spliced: false,
            },
        );
    }

    fn fragment(&self, v: &Value, depth: usize) -> Option<(String, &'a Value)> {
        let name = single_key(v, "$fragment")?.as_str()?;
        let frag = self
            .frags
            .get(name)
            .filter(|_| depth < MAX_FRAGMENT_DEPTH)?;
        Some((name.to_string(), frag))
    }

    fn build(&mut self, v: &Value, ptr: String, path: FieldPath, depth: usize) -> Value {
        match v {
            Value::String(s) => {
                self.origin(ptr, path, s.contains("${{"));
                v.clone()
            }
            Value::Object(map) => {
                if single_key(v, "$fragment").is_some() {
                    if let Some((name, frag)) = self.fragment(v, depth) {
                        let at = FieldPath::root().key("fragments").key(name);
                        return self.build(frag, ptr, at, depth + 1);
                    }
                    self.origin(ptr, path, true);
                    return v.clone();
                }
                if map.contains_key("$if") || map.contains_key("$splice") {
                    self.origin(ptr, path, true);
                    return v.clone();
                }
                let mut out = Map::new();
                for (k, val) in map {
                    let child = format!("{ptr}/{}", escape_pointer(k));
                    let built = self.build(val, child.clone(), path.clone().key(k.clone()), depth);
                    if k.contains("${{") {
                        self.origin(child, path.clone().key(k.clone()), true);
                    }
                    out.insert(k.clone(), built);
                }
                self.origin(ptr, path, false);
                Value::Object(out)
            }
            Value::Array(items) => {
                let mut out = Vec::new();
                let mut spliced = false;
                for (i, item) in items.iter().enumerate() {
                    let at = path.clone().index(i);
                    self.push_item(item, (&ptr, at), depth, &mut out, &mut spliced);
                }
                self.origins.insert(
                    ptr,
                    Origin {
                        path,
                        templated: false,
                        spliced,
                    },
                );
                Value::Array(out)
            }
            _ => {
                self.origin(ptr, path, false);
                v.clone()
            }
        }
    }

    /// Adds list element `item` (at field path `at` of the list at `ptr`) to `out`: a list
    /// fragment splices in, its own list fragments too, as the render splices them.
    fn push_item(
        &mut self,
        item: &Value,
        (ptr, at): (&str, FieldPath),
        depth: usize,
        out: &mut Vec<Value>,
        spliced: &mut bool,
    ) {
        if single_key(item, "$splice").is_some() {
            *spliced = true;
            return;
        }
        if let Some((name, Value::Array(elems))) = self.fragment(item, depth) {
            for (j, el) in elems.iter().enumerate() {
                let at = FieldPath::root()
                    .key("fragments")
                    .key(name.clone())
                    .index(j);
                self.push_item(el, (ptr, at), depth + 1, out, spliced);
            }
            return;
        }
        let built = self.build(item, format!("{ptr}/{}", out.len()), at, depth);
        out.push(built);
    }

    /// The origin of `ptr`'s nearest recorded ancestor-or-self, unless that or any ancestor is
    /// templated.
    fn known(&self, ptr: &str) -> Option<&Origin> {
        let mut found = None;
        let mut at = ptr;
        loop {
            if let Some(o) = self.origins.get(at) {
                if o.templated {
                    return None;
                }
                found.get_or_insert(o);
            }
            match at.rfind('/') {
                Some(i) => at = at.get(..i).unwrap_or(""),
                None => break,
            }
        }
        found
    }

    /// Compiles the CEL at `field.pointer` of the row `value` (when present and not templated)
    /// and refuses identifiers the caller does not bind.
    fn check_cel(
        &self,
        doc: &Document,
        value: &Value,
        field: &CelField,
        entry: &str,
        out: &mut Vec<Problem>,
    ) {
        let Some(text) = value.pointer(&field.pointer).and_then(Value::as_str) else {
            return;
        };
        let Some(origin) = self.known(&field.pointer) else {
            return;
        };
        let name = field.pointer.trim_start_matches('/').replace('/', ".");
        let expr = match Expr::compile(text) {
            Ok(e) => e,
            Err(e) => {
                out.push(violation(
                    doc,
                    ContractViolation::RowExpression,
                    &origin.path,
                    Some(entry),
                    format!("{name} does not compile: {e}"),
                ));
                return;
            }
        };
        for ident in free_identifiers(&expr) {
            if field.variables.contains(&ident) {
                continue;
            }
            out.push(violation(
                doc,
                ContractViolation::RowExpression,
                &origin.path,
                Some(entry),
                format!(
                    "{name} reads {ident:?}, which it is not evaluated with; variables: {}",
                    field.variables.join(", ")
                ),
            ));
        }
        for call in expr.unknown_calls() {
            if let crate::expr::UnknownCall::Qualified { target, .. } = &call
                && field.variables.contains(target)
            {
                continue;
            }
            out.push(violation(
                doc,
                ContractViolation::RowExpression,
                &origin.path,
                Some(entry),
                format!(
                    "{name}: {}; variables: {}",
                    call.text(),
                    field.variables.join(", ")
                ),
            ));
        }
    }

    fn report(
        &self,
        doc: &Document,
        table: &TableContract,
        entry: &str,
        e: &jsonschema::ValidationError<'_>,
        out: &mut Vec<Problem>,
    ) {
        let ptr = e.instance_path().as_str();
        let Some(origin) = self.known(ptr) else {
            return;
        };
        if let jsonschema::error::ValidationErrorKind::AdditionalProperties { unexpected } =
            e.kind()
        {
            // The object schema that refused the keys: its properties are what is allowed.
            let schema_ptr = e.schema_path().as_str();
            let parent = schema_ptr
                .strip_suffix("/additionalProperties")
                .unwrap_or(schema_ptr);
            let known: Vec<&str> = table
                .row_schema
                .pointer(parent)
                .and_then(|s| s.get("properties"))
                .and_then(Value::as_object)
                .map(|p| p.keys().map(String::as_str).collect())
                .unwrap_or_default();
            for key in unexpected.iter().filter(|k| !k.contains("${{")) {
                let at = origin.path.clone().key(key.clone());
                let pos = doc.spans.lookup_key(&at);
                out.push(Problem {
                    kind: ProblemKind::Contract,
                    error: Error::Contract {
                        violation: ContractViolation::RowSchema,
                        file: doc.source.name.clone(),
                        pos,
                        rule: Some(crate::error::Inside::Entry(entry.to_string())),
                        message: format!(
                            "unknown key {key:?} in a row of table {:?}; known keys: {}",
                            table.name,
                            known.join(", ")
                        ),
                    },
                });
            }
            return;
        }
        if origin.spliced && self.origins.get(ptr).is_some_and(|o| o.spliced) {
            // Items come from a `$splice`: the list's length and contents are unknown.
            return;
        }
        let why = match e.kind() {
            jsonschema::error::ValidationErrorKind::Format { format } if format == REGEX_FORMAT => {
                let text = e.instance().as_str().unwrap_or_default();
                regex_problem(text)
            }
            _ => e.to_string(),
        };
        out.push(violation(
            doc,
            ContractViolation::RowSchema,
            &origin.path,
            Some(entry),
            format!(
                "row does not match the schema of table {:?}: {why}",
                table.name
            ),
        ));
    }
}

/// The JSON Schema `format` of a row field that holds a regular expression in Go's RE2 syntax
/// (read with [`crate::go_regex`], as the tables' patterns are compiled): a row schema marks
/// such a field with it, so a pattern Go would refuse refuses the rule set at load.
pub const REGEX_FORMAT: &str = "go-regex";

/// Why `text` is not a regular expression as Go reads it, on one line:
/// ``invalid regex "(": missing closing ): `(` `` (Go's error and the part it quotes).
pub fn regex_problem(text: &str) -> String {
    match crate::go_regex::compile(text) {
        Ok(_) => format!("{} is a valid regex", crate::quote::go_quote(text)),
        Err(e) => format!(
            "invalid regex {}: {}: `{}`",
            crate::quote::go_quote(text),
            e.code(),
            e.expr()
        ),
    }
}

fn violation(
    doc: &Document,
    violation: ContractViolation,
    path: &FieldPath,
    rule: Option<&str>,
    message: String,
) -> Problem {
    Problem {
        kind: ProblemKind::Contract,
        error: Error::Contract {
            violation,
            file: doc.source.name.clone(),
            pos: doc.spans.lookup(path),
            rule: rule.map(|r| crate::error::Inside::in_doc(doc, r)),
            message,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{RuleSet, Source};
    use miette::Diagnostic;
    use serde_json::json;

    #[test]
    fn an_invalid_row_schema_is_an_error_when_compiled() {
        // Declaring compiles nothing; compiling names the table and the schema's fault.
        let c = Contract::new().table(
            "bad",
            "a table",
            serde_json::json!({"type": "no-such-type"}),
            None,
        );
        let err = c.compile_row_schemas().expect_err("the schema is refused");
        assert_eq!(
            err.to_string(),
            "invalid contract: row schema of table \"bad\": \"no-such-type\" is not valid under any of the schemas listed in the 'anyOf' keyword"
        );
        assert!(contract().compile_row_schemas().is_ok());
    }

    fn contract() -> Contract {
        let row = json!({
            "type": "object",
            "properties": {
                "platform": {"type": "string"},
                "count": {"type": "integer"},
                "args": {"type": "array", "items": {"type": "string"}},
                "env": {"type": "array", "items": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}, "value": {"type": "string"}},
                    "additionalProperties": false
                }}
            },
            "additionalProperties": false
        });
        Contract::new()
            .stage("admission", "first", &[])
            .stage("labels", "labels", &["labelsPath"])
            .table("rows", "rows", row, Some(&["n", "name"]))
    }

    fn load(text: &str) -> Vec<String> {
        match RuleSet::load(&[Source::new("r.yaml", text)], Some(&contract())) {
            Ok(_) => Vec::new(),
            Err(e) => e.errors.iter().map(ToString::to_string).collect(),
        }
    }

    const TABLE: &str =
        "apiVersion: policy.nvcre.nvidia.com/v1alpha1\nkind: Table\nmetadata: {name: rows}\n";

    #[test]
    fn a_set_without_a_declared_table_is_refused_only_when_every_table_is_required() {
        let pack = "apiVersion: policy.nvcre.nvidia.com/v1alpha1\nkind: RulePack\nmetadata: {name: p}\nstage: admission\nrules:\n- id: r\n  validate: {expression: 'true'}\n";
        let sources = [Source::new("cm/p.yaml", pack)];
        assert_eq!(load(pack), Vec::<String>::new());
        let strict = contract().require_every_table(true);
        let errors: Vec<String> = match RuleSet::load(&sources, Some(&strict)) {
            Ok(_) => Vec::new(),
            Err(e) => e.errors.iter().map(ToString::to_string).collect(),
        };
        // The stage `labels` has no pack either: a whole set lost it too.
        assert_eq!(
            errors,
            [
                "rule pack error: cm: no rule file defines a pack of stage \"labels\" (labels); the pipeline runs it, so the set is refused (a deleted or emptied file?)",
                "rule pack error: cm: no rule file defines table \"rows\" (rows); the pipeline renders it, so the set is refused"
            ]
        );
        let e = RuleSet::load(&sources, Some(&strict)).expect_err("refused");
        assert_eq!(
            e.errors.iter().map(Error::code).collect::<Vec<_>>(),
            ["nvcre::rules::empty_stage", "nvcre::rules::missing_table"]
        );
        // Complete when whole: packs alone are used as they are; a set with a table is whole,
        // and an emptied file in it is refused.
        let whole = contract().complete_when_whole(true);
        assert!(RuleSet::load(&sources, Some(&whole)).is_ok());
        let table = Source::new("cm/t.yaml", format!("{TABLE}entries: []\n"));
        let emptied = Source::new("cm/e.yaml", "# emptied\n");
        let errors: Vec<String> =
            match RuleSet::load(&[sources[0].clone(), table, emptied], Some(&whole)) {
                Ok(_) => Vec::new(),
                Err(e) => e.errors.iter().map(ToString::to_string).collect(),
            };
        assert_eq!(
            errors,
            [
                "rule pack error: cm/e.yaml: the rule file has no document, so it would load nothing and drop whatever it held; the set is refused: restore the file, or delete it",
                "rule pack error: cm: no rule file defines a pack of stage \"labels\" (labels); the pipeline runs it, so the set is refused (a deleted or emptied file?)"
            ]
        );
    }

    #[test]
    fn unknown_stage_is_a_diagnostic_with_code_and_help() {
        let src = Source::new(
            "r.yaml",
            "apiVersion: policy.nvcre.nvidia.com/v1alpha1\nkind: RulePack\nmetadata: {name: p}\nstage: labls\nrules:\n- id: r\n  validate: {expression: 'params.labelsPath != \"\"'}\n",
        );
        let err = RuleSet::load(&[src], Some(&contract())).unwrap_err();
        assert_eq!(
            err.to_string(),
            "rule pack error: r.yaml:4:8: unknown stage \"labls\"; known stages: admission, labels"
        );
        let e = &err.errors[0];
        assert_eq!(
            Diagnostic::code(e).map(|c| c.to_string()),
            Some("nvcre::rules::unknown_stage".to_string())
        );
        assert_eq!(
            e.help().map(|h| h.to_string()),
            Some("known stages: admission, labels".to_string())
        );
        assert_eq!(
            Diagnostic::code(&err).map(|c| c.to_string()),
            Some("nvcre::rules::load".to_string())
        );
    }

    #[test]
    fn objects_is_read_only_in_a_stage_that_binds_it() {
        let pack = |stage: &str| {
            format!(
                "apiVersion: policy.nvcre.nvidia.com/v1alpha1\nkind: RulePack\nmetadata: {{name: p}}\nstage: {stage}\nrules:\n- id: r\n  validate: {{expression: 'size(objects) > 0'}}\n"
            )
        };
        let with_lint = contract().stage_with_objects("lint", "sees objects", &[]);
        let load_with =
            |text: &str| match RuleSet::load(&[Source::new("r.yaml", text)], Some(&with_lint)) {
                Ok(_) => Vec::new(),
                Err(e) => e
                    .errors
                    .iter()
                    .map(|e| (e.to_string(), e.code()))
                    .collect::<Vec<_>>(),
            };
        assert_eq!(load_with(&pack("lint")), Vec::new());
        assert_eq!(
            load_with(&pack("admission")),
            [(
                "rule pack error: r.yaml:7:26: rule r: objects is not bound in stage \"admission\"; stages that bind it: lint".to_string(),
                "nvcre::rules::unbound_objects"
            )]
        );
        assert_eq!(
            load(&pack("admission")),
            [
                "rule pack error: r.yaml:7:26: rule r: objects is not bound in stage \"admission\"; stages that bind it: none"
            ]
        );
        let by_kind = pack("admission").replace("size(objects)", "size(objectsByKind)");
        assert_eq!(
            load_with(&by_kind),
            [(
                "rule pack error: r.yaml:7:26: rule r: objectsByKind is not bound in stage \"admission\"; stages that bind it: lint".to_string(),
                "nvcre::rules::unbound_objects"
            )]
        );
    }

    #[test]
    fn params_a_stage_does_not_pass_and_packs_without_stage() {
        assert_eq!(
            load(
                "apiVersion: policy.nvcre.nvidia.com/v1alpha1\nkind: RulePack\nmetadata: {name: p}\nstage: admission\nrules:\n- id: r\n  validate: {expression: \"params.?labelsPath.orValue('') != ''\"}\n---\napiVersion: policy.nvcre.nvidia.com/v1alpha1\nkind: RulePack\nmetadata: {name: q}\nrules:\n- id: s\n  validate: {expression: 'true'}\n"
            ),
            [
                "rule pack error: r.yaml:7:26: rule r: params.labelsPath is not passed to stage \"admission\" (it passes no params)",
                "rule pack error: r.yaml:10:7: pack \"q\" has no stage; known stages: admission, labels",
            ]
        );
    }

    #[test]
    fn a_param_tested_with_in_is_a_read_of_that_param() {
        // `'x' in params` is `has(params.x)`: a misspelt name is as undeclared as in a select.
        assert_eq!(
            load(
                "apiVersion: policy.nvcre.nvidia.com/v1alpha1\nkind: RulePack\nmetadata: {name: p}\nstage: admission\nrules:\n- id: r\n  validate: {expression: \"'labelsPth' in params\"}\n"
            ),
            [
                "rule pack error: r.yaml:7:26: rule r: params.labelsPth is not passed to stage \"admission\" (it passes no params)",
            ]
        );
    }

    #[test]
    fn unknown_keys_are_errors_beside_templated_values_which_are_not_checked() {
        assert_eq!(
            load(&format!(
                "{TABLE}entries:\n- id: a\n  include: params.n > 1\n  count: '${{{{ params.n }}}}'\n  platfrom: x\n  env: [{{name: A, valu: '1'}}, {{$if: 'params.n > 1', $then: {{bad: 1}}}}]\n  args: [x, {{$splice: '${{{{ [params.name] }}}}'}}]\n"
            )),
            [
                "rule pack error: r.yaml:8:3: entry a: unknown key \"platfrom\" in a row of table \"rows\"; known keys: platform, count, args, env",
                "rule pack error: r.yaml:9:19: entry a: unknown key \"valu\" in a row of table \"rows\"; known keys: name, value",
            ]
        );
    }

    #[test]
    fn a_fragment_is_checked_where_it_is_used_and_a_list_fragment_splices_into_a_list() {
        assert_eq!(
            load(&format!(
                "{TABLE}fragments:\n  envs: [{{name: A, value: '1'}}, {{name: B, vlue: '2'}}]\n  one: {{name: C, value: 3}}\nentries:\n- id: a\n  env: [{{$fragment: envs}}, {{$fragment: one}}, {{name: D, value: x}}]\n  args: [{{$fragment: missing}}]\n"
            )),
            [
                "rule pack error: r.yaml:5:43: entry a: unknown key \"vlue\" in a row of table \"rows\"; known keys: name, value",
                "rule pack error: r.yaml:6:25: entry a: row does not match the schema of table \"rows\": 3 is not of type \"string\"",
                "rule pack error: r.yaml:10:22: entry a: {$fragment: missing} names no fragment of this file",
            ]
        );
    }

    #[test]
    fn a_template_that_does_not_compile_is_refused_at_its_node() {
        assert_eq!(
            load(&format!(
                "{TABLE}entries:\n- id: a\n  args:\n  - x\n  - {{$fragment: 42}}\n"
            )),
            [
                "rule pack error: r.yaml:8:17: entry a: template: $fragment takes a fragment name (a string), not 42"
            ]
        );
    }

    #[test]
    fn a_table_param_it_is_not_rendered_with_and_an_unknown_table() {
        assert_eq!(
            load(&format!(
                "{TABLE}entries:\n- id: a\n  platform: '${{{{ params.platform }}}}'\n---\napiVersion: policy.nvcre.nvidia.com/v1alpha1\nkind: Table\nmetadata: {{name: other}}\nentries: []\n"
            )),
            [
                "rule pack error: r.yaml:6:13: entry a: params.platform is not a param of table \"rows\" (it is rendered with n, name)",
                "rule pack error: r.yaml:10:18: unknown table \"other\"; known tables: rows",
            ]
        );
    }
}
