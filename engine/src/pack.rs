//! Rule files: load, check the shape, compile every expression, refuse what does not compile.
//!
//! A rule file is a YAML stream of documents of two kinds (`apiVersion:
//! policy.nvcre.nvidia.com/v1alpha1`):
//!
//! - `kind: RulePack`: `match` (resources by apiVersion/kind, `matchConditions` in CEL),
//!   `variables`, `fragments` and `rules[]` with `validate` and/or `mutate`;
//! - `kind: Table`: `fragments` and `entries[]`, each entry a [`Template`] with an optional
//!   `include` CEL guard, rendered with caller-supplied `params` (the platform override table
//!   and the defaults tables are tables).
//!
//! Field names follow ValidatingAdmissionPolicy / MutatingAdmissionPolicy where they mean the
//! same thing. Unknown fields are refused with their line.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

use crate::error::Error;
use crate::expr::{Expr, Template};
use crate::finding::Severity;
use crate::patch::End;
use crate::path::FieldPath;
use crate::source::{Document, Pos, Source, parse_documents};

/// The apiVersion of rule files.
pub const RULES_API_VERSION: &str = "policy.nvcre.nvidia.com/v1alpha1";

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PackFile {
    api_version: String,
    // Dispatched on before deserializing; kept so deny_unknown_fields accepts it.
    #[serde(rename = "kind")]
    _kind: String,
    metadata: MetadataSpec,
    #[serde(default)]
    stage: Option<String>,
    #[serde(default, rename = "match")]
    matcher: Option<MatchSpec>,
    #[serde(default)]
    variables: Vec<VarSpec>,
    #[serde(default)]
    fragments: BTreeMap<String, Value>,
    #[serde(default)]
    rules: Vec<RuleSpec>,
    #[serde(default)]
    entries: Vec<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MetadataSpec {
    name: String,
    #[serde(default)]
    description: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct MatchSpec {
    #[serde(default)]
    resources: Vec<ResourceSpec>,
    #[serde(default)]
    match_conditions: Vec<VarSpec>,
}

#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ResourceSpec {
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct VarSpec {
    name: String,
    expression: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RuleSpec {
    id: String,
    #[serde(default)]
    severity: Severity,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    when: Option<String>,
    #[serde(default)]
    variables: Vec<VarSpec>,
    #[serde(default)]
    for_each: Option<ForEachSpec>,
    #[serde(default)]
    validate: Option<ValidateSpec>,
    #[serde(default)]
    mutate: Vec<MutationSpec>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ForEachSpec {
    #[serde(rename = "in")]
    items: String,
    #[serde(rename = "as")]
    var: String,
    #[serde(default)]
    index: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ValidateSpec {
    expression: String,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    message_expression: Option<String>,
    #[serde(default)]
    field_path: Option<String>,
    #[serde(default)]
    field_path_expression: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
enum MutationSpec {
    Merge { path: String, value: Value },
    Prepend { path: String, values: Value },
    Append { path: String, values: Value },
    JsonPatch(Value),
}

/// Which documents a pack applies to.
#[derive(Debug, Clone, Default)]
pub struct Matcher {
    resources: Vec<(Option<String>, Option<String>)>,
    pub(crate) conditions: Vec<(String, Expr)>,
}

impl Matcher {
    /// True when `doc`'s apiVersion and kind are among the pack's resources (or none are listed).
    pub fn matches_resource(&self, doc: &Value) -> bool {
        if self.resources.is_empty() {
            return true;
        }
        let api = doc.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        let kind = doc.get("kind").and_then(Value::as_str).unwrap_or("");
        self.resources.iter().any(|(a, k)| {
            a.as_deref().is_none_or(|a| a == "*" || a == api)
                && k.as_deref().is_none_or(|k| k == "*" || k == kind)
        })
    }
}

/// A rule's message: fixed text or a CEL expression.
#[derive(Debug, Clone)]
pub enum Message {
    /// Fixed text.
    Static(String),
    /// `messageExpression`.
    Expr(Expr),
}

/// A rule's field path: fixed or computed.
#[derive(Debug, Clone)]
pub enum FieldPathSpec {
    /// `fieldPath`.
    Static(FieldPath),
    /// `fieldPathExpression` (must yield a string in field-path notation).
    Expr(Expr),
}

/// A compiled `validate` block.
#[derive(Debug, Clone)]
pub struct Validate {
    pub(crate) expression: Expr,
    pub(crate) message: Message,
    pub(crate) field_path: Option<FieldPathSpec>,
}

/// A compiled mutation.
#[derive(Debug, Clone)]
pub enum Mutation {
    /// Recursive merge at a path (lists merged by name).
    Merge {
        /// Where.
        path: FieldPath,
        /// What, templated.
        value: Template,
    },
    /// Prepend or append list items at a path.
    Insert {
        /// Where.
        path: FieldPath,
        /// The items (a list), templated.
        values: Template,
        /// Front or back.
        end: End,
    },
    /// RFC 6902 operations, templated.
    JsonPatch(Template),
}

/// One compiled rule.
#[derive(Debug, Clone)]
pub struct Rule {
    /// Unique id.
    pub id: String,
    /// Severity of its findings.
    pub severity: Severity,
    /// Human description.
    pub description: Option<String>,
    /// Line:column of the rule in its file.
    pub pos: Pos,
    pub(crate) when: Option<Expr>,
    pub(crate) variables: Vec<(String, Expr)>,
    pub(crate) for_each: Option<(Expr, String, Option<String>)>,
    pub(crate) validate: Option<Validate>,
    pub(crate) mutate: Vec<Mutation>,
}

impl Rule {
    /// The validation expression text, if the rule validates.
    pub fn expression(&self) -> Option<&str> {
        self.validate.as_ref().map(|v| v.expression.text())
    }
}

/// A loaded, compiled `RulePack`. Immutable; share it with `Arc`.
#[derive(Debug, Clone)]
pub struct CompiledPack {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.description`.
    pub description: Option<String>,
    /// The pipeline stage that runs this pack (free text; the caller decides).
    pub stage: Option<String>,
    /// The file it came from.
    pub source: Arc<Source>,
    pub(crate) matcher: Matcher,
    pub(crate) variables: Vec<(String, Expr)>,
    pub(crate) fragments: Vec<(String, Template)>,
    /// The rules, in file order (which is evaluation order).
    pub rules: Vec<Rule>,
}

/// One entry of a [`Table`].
#[derive(Debug, Clone)]
pub struct TableEntry {
    /// The entry id.
    pub id: String,
    /// Line:column in the file.
    pub pos: Pos,
    pub(crate) include: Option<Expr>,
    pub(crate) body: Template,
}

/// A loaded `kind: Table`: data rendered with caller params (see [`Table::render`]).
#[derive(Debug, Clone)]
pub struct Table {
    /// `metadata.name`.
    pub name: String,
    /// The file it came from.
    pub source: Arc<Source>,
    pub(crate) fragments: Vec<(String, Template)>,
    /// The entries, in file order.
    pub entries: Vec<TableEntry>,
}

/// Every pack and table of a rule directory (or of the embedded default set).
#[derive(Debug, Clone, Default)]
pub struct RuleSet {
    /// The rule packs, in load order (files sorted by path, documents in order).
    pub packs: Vec<Arc<CompiledPack>>,
    /// The tables.
    pub tables: Vec<Arc<Table>>,
}

impl RuleSet {
    /// Loads and compiles rule files from sources.
    ///
    /// # Errors
    /// [`Error::Pack`] naming the file, line and rule id of the first problem: a wrong shape, an
    /// unknown field, an expression that does not compile, a duplicate rule id or pack name.
    pub fn from_sources(sources: &[Arc<Source>]) -> Result<RuleSet, Error> {
        let mut set = RuleSet::default();
        let mut rule_ids: HashSet<String> = HashSet::new();
        let mut names: HashSet<String> = HashSet::new();
        for source in sources {
            for doc in parse_documents(source)? {
                let kind = doc.value.get("kind").and_then(Value::as_str).unwrap_or("");
                match kind {
                    "RulePack" => {
                        let pack = compile_pack(&doc)?;
                        if !names.insert(format!("pack/{}", pack.name)) {
                            return Err(pack_err(
                                &doc,
                                "metadata.name",
                                None,
                                format!("duplicate pack name {:?}", pack.name),
                            ));
                        }
                        for (i, r) in pack.rules.iter().enumerate() {
                            if !rule_ids.insert(r.id.clone()) {
                                return Err(pack_err(
                                    &doc,
                                    &format!("rules[{i}].id"),
                                    Some(&r.id),
                                    "duplicate rule id".to_string(),
                                ));
                            }
                        }
                        set.packs.push(Arc::new(pack));
                    }
                    "Table" => {
                        let table = compile_table(&doc)?;
                        if !names.insert(format!("table/{}", table.name)) {
                            return Err(pack_err(
                                &doc,
                                "metadata.name",
                                None,
                                format!("duplicate table name {:?}", table.name),
                            ));
                        }
                        set.tables.push(Arc::new(table));
                    }
                    other => {
                        return Err(pack_err(
                            &doc,
                            "kind",
                            None,
                            format!("kind must be RulePack or Table, got {other:?}"),
                        ));
                    }
                }
            }
        }
        Ok(set)
    }

    /// Loads every `*.yaml` / `*.yml` file under `dir`, recursively, in path order. Directories
    /// named `tests` hold rule test suites and are skipped.
    ///
    /// # Errors
    /// [`Error::Io`] when the directory cannot be read; the errors of [`RuleSet::from_sources`].
    pub fn load_dir(dir: &Path) -> Result<RuleSet, Error> {
        let mut files = Vec::new();
        collect_rule_files(dir, &mut files)?;
        files.sort();
        if files.is_empty() {
            return Err(Error::Pack {
                file: dir.display().to_string(),
                pos: None,
                rule: None,
                message: "no rule files (*.yaml) found".to_string(),
            });
        }
        let mut sources = Vec::new();
        for f in files {
            let text = std::fs::read_to_string(&f).map_err(|source| Error::Io {
                path: f.display().to_string(),
                source,
            })?;
            sources.push(Source::new(f.display().to_string(), text));
        }
        RuleSet::from_sources(&sources)
    }

    /// The packs whose `stage` equals `stage`, in load order.
    pub fn stage<'a>(&'a self, stage: &'a str) -> impl Iterator<Item = &'a Arc<CompiledPack>> + 'a {
        self.packs
            .iter()
            .filter(move |p| p.stage.as_deref() == Some(stage))
    }

    /// The table named `name`.
    pub fn table(&self, name: &str) -> Option<&Arc<Table>> {
        self.tables.iter().find(|t| t.name == name)
    }

    /// Every rule with its pack, in load order.
    pub fn rules(&self) -> impl Iterator<Item = (&CompiledPack, &Rule)> {
        self.packs
            .iter()
            .flat_map(|p| p.rules.iter().map(move |r| (p.as_ref(), r)))
    }
}

fn collect_rule_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) -> Result<(), Error> {
    let io = |source| Error::Io {
        path: dir.display().to_string(),
        source,
    };
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "tests") {
                continue;
            }
            collect_rule_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(path);
        }
    }
    Ok(())
}

fn pack_err(doc: &Document, path: &str, rule: Option<&str>, message: String) -> Error {
    let pos = FieldPath::parse(path)
        .ok()
        .and_then(|p| doc.spans.lookup(&p));
    Error::Pack {
        file: doc.source.name.clone(),
        pos,
        rule: rule.map(str::to_string),
        message,
    }
}

fn deserialize_file(doc: &Document) -> Result<PackFile, Error> {
    let file: PackFile = serde_path_to_error::deserialize(&doc.value).map_err(|e| {
        let path = e.path().to_string();
        let rule = rule_id_at(doc, &path);
        // Point at the field's name: for an unknown field that is the thing to fix.
        let pos = FieldPath::parse(&path)
            .ok()
            .and_then(|p| doc.spans.lookup_key(&p));
        Error::Pack {
            file: doc.source.name.clone(),
            pos,
            rule,
            message: e.inner().to_string(),
        }
    })?;
    if file.api_version != RULES_API_VERSION {
        return Err(pack_err(
            doc,
            "apiVersion",
            None,
            format!(
                "apiVersion must be {RULES_API_VERSION}, got {:?}",
                file.api_version
            ),
        ));
    }
    Ok(file)
}

/// For an error path `rules[3].validate…`, the id of rule 3.
fn rule_id_at(doc: &Document, path: &str) -> Option<String> {
    let rest = path.strip_prefix("rules[")?;
    let idx: usize = rest.split(']').next()?.parse().ok()?;
    doc.value
        .get("rules")?
        .get(idx)?
        .get("id")?
        .as_str()
        .map(str::to_string)
}

fn compile_expr(doc: &Document, path: &str, rule: Option<&str>, text: &str) -> Result<Expr, Error> {
    Expr::compile(text).map_err(|e| pack_err(doc, path, rule, format!("CEL does not compile: {e}")))
}

fn compile_template(
    doc: &Document,
    path: &str,
    rule: Option<&str>,
    v: &Value,
) -> Result<Template, Error> {
    Template::compile(v).map_err(|e| pack_err(doc, path, rule, format!("template: {e}")))
}

fn compile_vars(
    doc: &Document,
    base: &str,
    rule: Option<&str>,
    vars: &[VarSpec],
) -> Result<Vec<(String, Expr)>, Error> {
    vars.iter()
        .enumerate()
        .map(|(i, v)| {
            Ok((
                v.name.clone(),
                compile_expr(doc, &format!("{base}[{i}].expression"), rule, &v.expression)?,
            ))
        })
        .collect()
}

fn compile_fragments(
    doc: &Document,
    frags: &BTreeMap<String, Value>,
) -> Result<Vec<(String, Template)>, Error> {
    frags
        .iter()
        .map(|(name, v)| {
            let path = FieldPath::root()
                .key("fragments")
                .key(name.clone())
                .to_string();
            Ok((name.clone(), compile_template(doc, &path, None, v)?))
        })
        .collect()
}

fn compile_pack(doc: &Document) -> Result<CompiledPack, Error> {
    let file = deserialize_file(doc)?;
    if !file.entries.is_empty() {
        return Err(pack_err(
            doc,
            "entries",
            None,
            "a RulePack has rules, not entries".into(),
        ));
    }
    let matcher = match &file.matcher {
        None => Matcher::default(),
        Some(m) => Matcher {
            resources: m
                .resources
                .iter()
                .map(|r| (r.api_version.clone(), r.kind.clone()))
                .collect(),
            conditions: compile_vars(doc, "match.matchConditions", None, &m.match_conditions)?,
        },
    };
    let mut rules = Vec::with_capacity(file.rules.len());
    for (i, r) in file.rules.iter().enumerate() {
        rules.push(compile_rule(doc, i, r)?);
    }
    Ok(CompiledPack {
        name: file.metadata.name,
        description: file.metadata.description,
        stage: file.stage,
        source: doc.source.clone(),
        matcher,
        variables: compile_vars(doc, "variables", None, &file.variables)?,
        fragments: compile_fragments(doc, &file.fragments)?,
        rules,
    })
}

fn compile_rule(doc: &Document, i: usize, r: &RuleSpec) -> Result<Rule, Error> {
    let base = format!("rules[{i}]");
    let id = Some(r.id.as_str());
    let pos = FieldPath::parse(&base)
        .ok()
        .and_then(|p| doc.spans.lookup(&p))
        .unwrap_or(Pos { line: 0, column: 0 });
    if r.validate.is_none() && r.mutate.is_empty() {
        return Err(pack_err(
            doc,
            &base,
            id,
            "a rule needs validate or mutate".into(),
        ));
    }
    let validate = match &r.validate {
        None => None,
        Some(v) => {
            let message = match (&v.message, &v.message_expression) {
                (Some(_), Some(_)) => {
                    return Err(pack_err(
                        doc,
                        &format!("{base}.validate"),
                        id,
                        "message and messageExpression are mutually exclusive".into(),
                    ));
                }
                (Some(m), None) => Message::Static(m.clone()),
                (None, Some(e)) => Message::Expr(compile_expr(
                    doc,
                    &format!("{base}.validate.messageExpression"),
                    id,
                    e,
                )?),
                (None, None) => Message::Static(format!("failed rule {}", r.id)),
            };
            let field_path = match (&v.field_path, &v.field_path_expression) {
                (Some(_), Some(_)) => {
                    return Err(pack_err(
                        doc,
                        &format!("{base}.validate"),
                        id,
                        "fieldPath and fieldPathExpression are mutually exclusive".into(),
                    ));
                }
                (Some(p), None) => {
                    Some(FieldPathSpec::Static(FieldPath::parse(p).map_err(|e| {
                        pack_err(doc, &format!("{base}.validate.fieldPath"), id, e)
                    })?))
                }
                (None, Some(e)) => Some(FieldPathSpec::Expr(compile_expr(
                    doc,
                    &format!("{base}.validate.fieldPathExpression"),
                    id,
                    e,
                )?)),
                (None, None) => None,
            };
            Some(Validate {
                expression: compile_expr(
                    doc,
                    &format!("{base}.validate.expression"),
                    id,
                    &v.expression,
                )?,
                message,
                field_path,
            })
        }
    };
    let mut mutate = Vec::new();
    for (j, m) in r.mutate.iter().enumerate() {
        let mbase = format!("{base}.mutate[{j}]");
        let parse_path = |p: &str, key: &str| {
            FieldPath::parse(p).map_err(|e| pack_err(doc, &format!("{mbase}.{key}.path"), id, e))
        };
        mutate.push(match m {
            MutationSpec::Merge { path, value } => Mutation::Merge {
                path: parse_path(path, "merge")?,
                value: compile_template(doc, &format!("{mbase}.merge.value"), id, value)?,
            },
            MutationSpec::Prepend { path, values } => Mutation::Insert {
                path: parse_path(path, "prepend")?,
                values: compile_template(doc, &format!("{mbase}.prepend.values"), id, values)?,
                end: End::Front,
            },
            MutationSpec::Append { path, values } => Mutation::Insert {
                path: parse_path(path, "append")?,
                values: compile_template(doc, &format!("{mbase}.append.values"), id, values)?,
                end: End::Back,
            },
            MutationSpec::JsonPatch(ops) => Mutation::JsonPatch(compile_template(
                doc,
                &format!("{mbase}.jsonPatch"),
                id,
                ops,
            )?),
        });
    }
    Ok(Rule {
        id: r.id.clone(),
        severity: r.severity,
        description: r.description.clone(),
        pos,
        when: r
            .when
            .as_deref()
            .map(|w| compile_expr(doc, &format!("{base}.when"), id, w))
            .transpose()?,
        variables: compile_vars(doc, &format!("{base}.variables"), id, &r.variables)?,
        for_each: r
            .for_each
            .as_ref()
            .map(|f| {
                Ok::<_, Error>((
                    compile_expr(doc, &format!("{base}.forEach.in"), id, &f.items)?,
                    f.var.clone(),
                    f.index.clone(),
                ))
            })
            .transpose()?,
        validate,
        mutate,
    })
}

fn compile_table(doc: &Document) -> Result<Table, Error> {
    let file = deserialize_file(doc)?;
    if !file.rules.is_empty() || file.matcher.is_some() || !file.variables.is_empty() {
        return Err(pack_err(
            doc,
            "kind",
            None,
            "a Table has fragments and entries only".into(),
        ));
    }
    let mut entries = Vec::with_capacity(file.entries.len());
    let mut ids = HashSet::new();
    for (i, e) in file.entries.iter().enumerate() {
        let base = format!("entries[{i}]");
        let Some(obj) = e.as_object() else {
            return Err(pack_err(
                doc,
                &base,
                None,
                "a table entry must be a mapping".into(),
            ));
        };
        let Some(id) = obj.get("id").and_then(Value::as_str) else {
            return Err(pack_err(
                doc,
                &base,
                None,
                "a table entry needs a string id".into(),
            ));
        };
        if !ids.insert(id.to_string()) {
            return Err(pack_err(
                doc,
                &format!("{base}.id"),
                Some(id),
                "duplicate entry id".into(),
            ));
        }
        let include = match obj.get("include") {
            None => None,
            Some(Value::String(s)) => {
                Some(compile_expr(doc, &format!("{base}.include"), Some(id), s)?)
            }
            Some(_) => {
                return Err(pack_err(
                    doc,
                    &format!("{base}.include"),
                    Some(id),
                    "include must be a CEL string".into(),
                ));
            }
        };
        let mut body = obj.clone();
        body.remove("id");
        body.remove("include");
        let pos = FieldPath::parse(&base)
            .ok()
            .and_then(|p| doc.spans.lookup(&p))
            .unwrap_or(Pos { line: 0, column: 0 });
        entries.push(TableEntry {
            id: id.to_string(),
            pos,
            include,
            body: compile_template(doc, &base, Some(id), &Value::Object(body))?,
        });
    }
    Ok(Table {
        name: file.metadata.name,
        source: doc.source.clone(),
        fragments: compile_fragments(doc, &file.fragments)?,
        entries,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<RuleSet, Error> {
        RuleSet::from_sources(&[Source::new("rules/x.yaml", text)])
    }

    const HEAD: &str =
        "apiVersion: policy.nvcre.nvidia.com/v1alpha1\nkind: RulePack\nmetadata:\n  name: p\n";

    #[test]
    fn cel_syntax_error_names_file_line_and_rule() {
        let text = format!(
            "{HEAD}rules:\n- id: ok\n  validate:\n    expression: 'true'\n- id: broken\n  validate:\n    expression: 'object.spec.('\n"
        );
        let err = load(&text).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.starts_with(
                "rule pack error: rules/x.yaml:11:17: rule broken: CEL does not compile:"
            ),
            "{msg}"
        );
    }

    #[test]
    fn unknown_fields_are_refused_with_their_line() {
        let text = format!("{HEAD}rules:\n- id: r\n  validate:\n    expresion: 'true'\n");
        let msg = load(&text).unwrap_err().to_string();
        assert!(
            msg.starts_with("rule pack error: rules/x.yaml:8:5: rule r: unknown field `expresion`"),
            "{msg}"
        );
    }

    #[test]
    fn duplicate_rule_ids_are_refused() {
        let text = format!(
            "{HEAD}rules:\n- id: r\n  validate: {{expression: 'true'}}\n- id: r\n  validate: {{expression: 'true'}}\n"
        );
        let msg = load(&text).unwrap_err().to_string();
        assert_eq!(
            msg,
            "rule pack error: rules/x.yaml:8:7: rule r: duplicate rule id"
        );
    }
}
