//! CEL: compile once, evaluate many times; and YAML templates with embedded CEL.
//!
//! Expressions use `cel` 0.15 with its `strings` and `lists` extensions, the optional syntax
//! (`a.?b.orValue(c)`) and our own functions (`typeName`, `goQuote`, the named formats of the
//! API server, a cached `matches`). A bound JSON document is read in place, never converted
//! (see [`crate::view`]).
//!
//! A [`Template`] is a YAML value whose strings may embed CEL as `${{ expr }}`:
//! - a string that is exactly one `${{ expr }}` becomes the expression's value, of any type;
//! - a string with text around `${{ … }}` is interpolated (each value converted to a string);
//! - `{$fragment: name}` is replaced by the named fragment; inside a list, a fragment that is a
//!   list is spliced in;
//! - `{$splice: "${{ expr }}"}` inside a list splices the list the expression returns;
//! - `{$if: "<cel>", $then: X, $else: Y}` renders X or Y; without `$else` a false condition
//!   omits the entry from its mapping or list.
//! - mapping keys may be templated too.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, LazyLock, Mutex, OnceLock};

use cel::IdedExpr;
use cel::common::ast::{EntryExpr, Expr as AstExpr, IdedEntryExpr, LiteralValue, operators};
use cel::common::types::{CelBool, CelOptional, CelString, Kind, Type};
use cel::common::value::{CowVal, StaticVal, Val};
use cel::context::VariableResolver;
use cel::objects::{Key, Map as CelMap};
use cel::{ExecutionError, FunctionContext};
use serde_json::{Map, Value};

/// The CEL values results are handed out as.
pub(crate) type Cel = cel::Value;

use crate::error::{CompileError, ConversionError, EvaluationError};
use crate::view::{NodeRef, json_node};

mod direct;
mod field_types;

/// The name of the field-type walk (`fieldTypeErrors`), which the cost estimate counts.
pub(crate) const FIELD_TYPE_ERRORS: &str = field_types::NAME;

pub(crate) use field_types::check_table as check_field_type_table;

/// Our functions of a fixed number of operands (a method's receiver counted), with how their
/// operands are named: a call with another number is refused when the rules load.
pub(crate) const FIXED_ARITIES: [(&str, usize, &str); 3] = [
    ("typeName", 1, "(x)"),
    ("goQuote", 1, "(s)"),
    (field_types::NAME, 3, "(holder, fields, path)"),
];
pub use direct::set_direct_evaluation;
use direct::{Charge, Charges, Direct};

/// The parser's message without the debug text some of its errors carry
/// (`Syntax error: OtherError(ParseError { …, msg: "Recursion limit of 96 exceeded", … })`):
/// `Syntax error: Recursion limit of 96 exceeded`.
fn plain_parse_message(msg: &str) -> String {
    if msg.contains("ParseError {")
        && let Some(start) = msg.find("msg: \"")
        && let Some(len) = msg[start + 6..].find('"')
    {
        let inner = &msg[start + 6..start + 6 + len];
        let hint = if inner.contains("Recursion limit") {
            " (the expression nests too deeply: split it, or name its parts as variables)"
        } else {
            ""
        };
        return format!("Syntax error: {inner}{hint}");
    }
    msg.to_string()
}

/// The declarations (standard library, `strings` and `lists` extensions, macros), built once.
/// A declaration that failed to register would leave its function undeclared, so calls to it
/// fail: nothing passes for lack of it.
static ENV: LazyLock<Arc<cel::Env>> = LazyLock::new(|| {
    let mut env = cel::Env::stdlib();
    let _ = env.add_extension(cel::extensions::strings);
    let _ = env.add_extension(cel::extensions::lists);
    Arc::new(env)
});

/// The function table (ours over [`ENV`]), built once per process and shared by every thread:
/// each evaluation runs in a child scope of it. `cel::Context` holds only `Send + Sync`
/// functions, so one immutable root serves all threads.
static ROOT: LazyLock<cel::Context<'static, 'static>> = LazyLock::new(|| {
    let mut ctx = cel::Context::with_env(ENV.clone());
    register_types(&mut ctx);
    register_cached_regex(&mut ctx);
    register_cost(&mut ctx);
    register_formats(&mut ctx);
    register_quantities(&mut ctx);
    register_equality(&mut ctx);
    ctx
});

/// A call an expression makes that the interpreter cannot resolve, found when the rules load
/// ([`Expr::unknown_calls`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum UnknownCall {
    /// `f(…)` or `x.f(…)`: no function or method `f` (`sizee`, `isBiggerThan`).
    Function(String),
    /// `ns.f(…)` where `ns` is an identifier that is neither a namespace with a function `f`
    /// (`sets.contains`, `lists.nope`) nor one of `bound` (a comprehension's variable): the
    /// caller tells whether `ns` is a name the expression can read.
    Qualified {
        /// The identifier before the dot.
        target: String,
        /// The function after it.
        function: String,
    },
}

impl UnknownCall {
    /// What is wrong, in one phrase: `sizee is not a function or method of the CEL library
    /// here`, `sets.contains is not a function of the CEL library here`.
    pub(crate) fn text(&self) -> String {
        match self {
            UnknownCall::Function(f) => {
                format!("{f} is not a function or method of the CEL library here")
            }
            UnknownCall::Qualified { target, function } => {
                format!("{target}.{function} is not a function of the CEL library here")
            }
        }
    }
}

/// Whether the interpreter resolves a call of this shape, asked of the interpreter itself:
/// `probe` (e.g. `sizee(null)`, `null.startsWith(null)`) is evaluated once per process, and
/// only an undeclared reference counts (a call with the wrong operands is an overload error,
/// which is still a known name). `Some(name)` is the name it found undeclared.
fn probe_undeclared(probe: &str) -> Option<String> {
    static PROBES: LazyLock<Mutex<HashMap<String, Option<String>>>> =
        LazyLock::new(Default::default);
    if let Some(known) = PROBES.lock().ok().and_then(|m| m.get(probe).cloned()) {
        return known;
    }
    let found = match ENV.compile(probe) {
        Err(_) => None,
        Ok(program) => {
            let root: &cel::Context<'_, '_> = &ROOT;
            let (result, _) = crate::cost::measure(|| {
                let ctx = root.new_inner_scope();
                match program.execute(&ctx) {
                    Err(ExecutionError::UndeclaredReference(name)) => Some(name.to_string()),
                    _ => None,
                }
            });
            result
        }
    };
    if let Ok(mut m) = PROBES.lock() {
        m.insert(probe.to_string(), found.clone());
    }
    found
}

/// Expressions already compiled, by text: rule files repeat many expressions (`params.entryName`,
/// `has(object.spec)`), and parsing is most of the cost of loading a rule set. A compiled
/// expression is immutable, so one copy serves every pack and thread.
static COMPILED: LazyLock<Mutex<HashMap<String, Expr>>> = LazyLock::new(Default::default);

/// How many texts [`COMPILED`] keeps before it starts over (a controller reloading rule sets
/// that change must not grow it without bound).
const COMPILED_MAX: usize = 16_384;

/// A compiled CEL expression with its source text.
#[derive(Debug, Clone)]
pub struct Expr {
    text: Arc<str>,
    ast: Arc<cel::parser::Expression>,
    /// Identifiers the expression reads, sorted: only those locals are added when it runs.
    refs: Arc<Vec<String>>,
    /// Which fragments the expression reads (`fragments.x`, `fragments['x']`).
    fragment_reads: Arc<FieldReads>,
    /// Which params the expression reads (`params.x`, `params['x']`).
    param_reads: Arc<FieldReads>,
    /// The expression as a selection into a bound document, when it is nothing else.
    path: Option<Arc<PathExpr>>,
    /// The expression in direct form, when it is one of the plainest ([`Direct`]).
    direct: Option<Arc<Direct>>,
}

/// An expression that only selects into a binding: `object.spec.?dependencies.orValue([])`,
/// `variables.ref.?name.orValue('')`. A variable with such an expression is kept as the place
/// it selects (a shared document and the keys to it), not as a copy of what is there.
#[derive(Debug, PartialEq)]
pub(crate) struct PathExpr {
    /// The identifier selected from (`object`, `__variables__ref`).
    root: String,
    /// The keys selected, in order.
    steps: Vec<String>,
    /// `steps[optional_from..]` are optional selects (`.?key`); the ones before are plain.
    optional_from: usize,
    /// The `orValue` literal, present exactly when some select is optional.
    default: Option<Value>,
}

impl PathExpr {
    /// `e` as a path, when it is one: an identifier, then plain selects, then optional selects
    /// closed by `.orValue(literal)` (a literal JSON holds: a string, int, finite double, bool,
    /// null, `[]` or `{}`).
    fn of(e: &IdedExpr) -> Option<PathExpr> {
        let (inner, default) = match &e.expr {
            AstExpr::Call(c) if c.func_name == "orValue" && c.args.len() == 1 => {
                (c.target.as_deref()?, Some(literal_json(&c.args[0])?))
            }
            _ => (e, None),
        };
        let (root, steps) = select_chain(inner)?;
        let optional_from = steps.iter().position(|(_, o)| *o).unwrap_or(steps.len());
        if steps.is_empty()
            || steps[optional_from..].iter().any(|(_, o)| !o)
            || (optional_from < steps.len()) != default.is_some()
        {
            return None;
        }
        Some(PathExpr {
            root,
            steps: steps.into_iter().map(|(k, _)| k).collect(),
            optional_from,
            default,
        })
    }

    /// The value the expression gives in `scope`, when the document answers it without CEL:
    /// every key present in a mapping, or an optional key absent (then the default). `None`
    /// for everything else (a key missing where the select is plain, a step into something
    /// that is not a mapping, a root that is not a shared JSON document): CEL evaluates those,
    /// with its own value or error.
    fn walk(&self, scope: &Scope) -> Option<Stored> {
        let (root, base) = scope.json_place(&self.root, true)?;
        let mut path = base.to_vec();
        let mut cur = at_path(root, &path)?;
        for (i, key) in self.steps.iter().enumerate() {
            match crate::view::json_field(cur.as_object()?, key) {
                Some(v) => {
                    cur = v;
                    path.push(key.clone());
                }
                None if i >= self.optional_from => {
                    return Some(Stored::json(self.default.clone()?));
                }
                None => return None,
            }
        }
        Some(Stored::Json {
            root: root.clone(),
            path: path.into(),
        })
    }
}

/// `e` as an identifier followed by selects: the identifier and each selected key, outermost
/// first, with whether the select is optional (`.?key`, compiled as `[?'key']`, see
/// [`rewrite_optional_select`], or `[?'key']`). `None` for anything else.
fn select_chain(e: &IdedExpr) -> Option<(String, Vec<(String, bool)>)> {
    // Innermost first, until the reversal below.
    let mut steps = Vec::new();
    let mut cur = e;
    let root = loop {
        match &cur.expr {
            AstExpr::Ident(name) => break name.clone(),
            AstExpr::Select(sel) if !sel.test => {
                steps.push((sel.field.clone(), false));
                cur = &sel.operand;
            }
            AstExpr::Call(c)
                if (c.func_name == operators::OPT_SELECT
                    || c.func_name == operators::OPT_INDEX)
                    && c.target.is_none() =>
            {
                let [operand, field] = c.args.as_slice() else {
                    return None;
                };
                let AstExpr::Literal(LiteralValue::String(f)) = &field.expr else {
                    return None;
                };
                steps.push((f.inner().to_string(), true));
                cur = operand;
            }
            _ => return None,
        }
    };
    steps.reverse();
    Some((root, steps))
}

/// The value at `path` below `root`: each step a mapping's key, or, where the value is a list,
/// the decimal index of an element (a `forEach` item's place, see [`Expr::eval_list`]).
fn at_path<'v>(root: &'v Value, path: &[String]) -> Option<&'v Value> {
    path.iter().try_fold(root, |v, k| match v {
        Value::Array(items) => items.get(k.parse::<usize>().ok()?),
        _ => crate::view::json_field(v.as_object()?, k),
    })
}

/// How many nodes [`place_in`] looks at before it gives up (and the value is copied).
const PLACE_SEARCH_NODES: usize = 4096;

/// Where `node` is below `root`: the keys and indexes from `root` to it (appended to
/// `path`, innermost last), within `budget` nodes looked at.
fn place_in(v: &Value, node: NodeRef, path: &mut Vec<String>, budget: &mut usize) -> bool {
    if node.is(v) {
        return true;
    }
    if *budget == 0 {
        return false;
    }
    *budget -= 1;
    let mut step = |key: &dyn Fn() -> String, child: &Value, path: &mut Vec<String>| {
        if !matches!(child, Value::Object(_) | Value::Array(_)) {
            return false;
        }
        let at = path.len();
        if place_in(child, node, path, budget) {
            path.insert(at, key());
            return true;
        }
        false
    };
    match v {
        Value::Object(m) => m.iter().any(|(k, c)| step(&|| k.clone(), c, path)),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .any(|(i, c)| step(&|| i.to_string(), c, path)),
        _ => false,
    }
}

/// What a `forEach.in` expression gave ([`Expr::eval_list`]).
pub(crate) enum Listed {
    /// A list JSON holds, `len` elements long, at `path` below `root`: its items are bound
    /// in place ([`Scope::bind_at`]).
    At {
        /// The document (or the list's own copy) the list is part of.
        root: Arc<Value>,
        /// Where the list is below `root`.
        path: Arc<[String]>,
        /// Its length.
        len: usize,
    },
    /// The keys of a mapping, in iteration order ([`sorted_keys`]).
    Keys(Vec<Cel>),
    /// Any other value, in the interpreter's form.
    Cel(Cel),
}

/// A mapping's keys in the order `forEach` visits them: sorted by their debug form, so findings
/// come in the same order whatever order the mapping holds them in.
pub(crate) fn sorted_keys(keys: impl Iterator<Item = Cel>) -> Vec<Cel> {
    let mut keys: Vec<(String, Cel)> = keys.map(|k| (format!("{k:?}"), k)).collect();
    keys.sort_by(|a, b| a.0.cmp(&b.0));
    keys.into_iter().map(|(_, k)| k).collect()
}

/// A literal as JSON, when JSON holds it exactly.
pub(crate) fn literal_json(e: &IdedExpr) -> Option<Value> {
    Some(match &e.expr {
        AstExpr::Literal(LiteralValue::String(s)) => Value::String(s.inner().to_string()),
        AstExpr::Literal(LiteralValue::Int(i)) => Value::from(*i.inner()),
        AstExpr::Literal(LiteralValue::Double(d)) => {
            Value::Number(serde_json::Number::from_f64(*d.inner())?)
        }
        AstExpr::Literal(LiteralValue::Boolean(b)) => Value::Bool(*b.inner()),
        AstExpr::Literal(LiteralValue::Null) => Value::Null,
        AstExpr::List(l) if l.optional_indices.is_empty() => {
            Value::Array(l.elements.iter().map(literal_json).collect::<Option<_>>()?)
        }
        // String keys, each once (a repeated key is the interpreter's to judge), in sorted
        // order: a map CEL builds has no order of its own, and its JSON form is sorted.
        AstExpr::Map(m) => {
            let mut entries = Vec::with_capacity(m.entries.len());
            for entry in &m.entries {
                let EntryExpr::MapEntry(e) = &entry.expr else {
                    return None;
                };
                let AstExpr::Literal(LiteralValue::String(key)) = &e.key.expr else {
                    return None;
                };
                if e.optional {
                    return None;
                }
                entries.push((key.inner().to_string(), literal_json(&e.value)?));
            }
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            if entries.windows(2).any(|w| w[0].0 == w[1].0) {
                return None;
            }
            Value::Object(entries.into_iter().collect())
        }
        _ => return None,
    })
}

/// The prefix under which `variables.<name>` is bound (see [`rewrite_optional_select`]).
pub(crate) const VARIABLE_PREFIX: &str = "__variables__";

/// The macros [`ENV`] declares beyond the standard ones, which only its (ANTLR) parser expands:
/// the lists extension's `sortBy`, the optional library's `optMap` and `optFlatMap` (each binds
/// a variable, so unexpanded it would read as an undefined name).
const ENV_MACROS: [&str; 3] = ["sortBy", "optMap", "optFlatMap"];

/// The prefix of a failed fragment's key among a scope's failures (no identifier has a dot).
const FRAGMENT_FAILURE_PREFIX: &str = "fragments.";

/// Parses `text`: with the Pratt parser, which builds the same tree as the ANTLR one in a
/// fraction of the time (engine/tests/parsers.rs holds them to that over every shipped rule
/// expression); with the ANTLR parser for what the Pratt one refuses, so that what compiles and
/// the error messages are the ANTLR parser's, and for the macros the Pratt parser does not
/// know ([`ENV_MACROS`]).
fn parse(text: &str) -> Result<IdedExpr, cel::ParseErrors> {
    if !ENV_MACROS.iter().any(|m| text.contains(m))
        && let Ok(ast) = cel::parser::PrattParser::new()
            .enable_optional_syntax(true)
            .parse(text)
    {
        return Ok(ast);
    }
    ENV.parser().enable_optional_syntax(true).parse(text)
}

/// Which fields of a map-valued binding (`params`, `fragments`) expressions read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FieldReads {
    /// Only these fields, each read as `name.field`, `name['field']` or `name[?'field']`.
    Fields(BTreeSet<String>),
    /// The binding is used whole (passed on, iterated, indexed by a computed key).
    All,
}

impl FieldReads {
    /// Adds what `other` reads.
    pub(crate) fn merge(&mut self, other: &FieldReads) {
        match (&mut *self, other) {
            (FieldReads::All, _) => {}
            (_, FieldReads::All) => *self = FieldReads::All,
            (FieldReads::Fields(a), FieldReads::Fields(b)) => a.extend(b.iter().cloned()),
        }
    }
}

/// Why an evaluation failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EvalError {
    /// The expression (or template) itself failed.
    Own(String),
    /// It reads a variable or fragment that could not be evaluated; the message names that one.
    Upstream(Arc<str>),
    /// It reads, directly or through variables, a binding the caller could not provide (the
    /// `objects` of an input too large to hold): the caller's reason, passed on unchanged by
    /// every variable on the way, since their expressions say nothing more about it.
    Unavailable(Arc<str>),
}

impl EvalError {
    /// Prefixes the message of an [`EvalError::Own`]; an upstream failure keeps its message, so
    /// it reads the same wherever the failed variable is read.
    fn context(self, f: impl FnOnce(String) -> String) -> EvalError {
        match self {
            EvalError::Own(m) => EvalError::Own(f(m)),
            up @ (EvalError::Upstream(_) | EvalError::Unavailable(_)) => up,
        }
    }
}

impl std::fmt::Display for EvalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EvalError::Own(m) => f.write_str(m),
            EvalError::Upstream(m) | EvalError::Unavailable(m) => f.write_str(m),
        }
    }
}

impl Expr {
    /// Compiles `text`.
    ///
    /// # Errors
    /// [`CompileError`]: the parser's message (with its position inside the expression).
    pub fn compile(text: &str) -> Result<Expr, CompileError> {
        if let Some(e) = COMPILED.lock().ok().and_then(|c| c.get(text).cloned()) {
            return Ok(e);
        }
        let e = Expr::compile_text(text).map_err(|(message, at)| CompileError { message, at })?;
        if let Ok(mut c) = COMPILED.lock() {
            if c.len() >= COMPILED_MAX {
                c.clear();
            }
            c.insert(text.to_string(), e.clone());
        }
        Ok(e)
    }

    fn compile_text(text: &str) -> Result<Expr, (String, Option<(usize, usize)>)> {
        let mut ast = parse(&rewrite_optional_select(text)).map_err(|rewritten| {
            // Report positions in the text as written, not in the rewritten one.
            match parse(text) {
                Err(errs) => {
                    let mut said: Vec<String> = errs
                        .errors
                        .iter()
                        .map(|e| {
                            let msg = plain_parse_message(&e.msg);
                            if e.pos.1 < 1 {
                                msg
                            } else if text.contains('\n') {
                                format!("{msg} (expression line {}, column {})", e.pos.0, e.pos.1)
                            } else {
                                format!("{msg} (expression column {})", e.pos.1)
                            }
                        })
                        .collect();
                    // The nesting limit is reported for every level the parser unwinds: once
                    // is enough.
                    if said.iter().any(|m| m.contains("Recursion limit")) {
                        said.truncate(1);
                    }
                    let at = errs.errors.first().and_then(|e| {
                        Some((usize::try_from(e.pos.0).ok()?, usize::try_from(e.pos.1).ok()?))
                            .filter(|(l, c)| *l >= 1 && *c >= 1)
                    });
                    (said.join("; "), at)
                }
                // Only the rewritten form fails: a variable where the grammar wants a field
                // selection (`has(variables.v)`). Its words, with the variable as written.
                Ok(_) => {
                    let said = rewritten
                        .errors
                        .iter()
                        .map(|e| e.msg.replace(VARIABLE_PREFIX, "variables."))
                        .collect::<Vec<_>>()
                        .join("; ");
                    let has = rewritten.errors.iter().any(|e| e.msg.contains("has()"));
                    let message = if has {
                        format!(
                            "{said}: a variable is not a field; has() tests a field of a map (has(variables.v.f)); test a variable's value instead (variables.v != null)"
                        )
                    } else {
                        said
                    };
                    (message, None)
                }
            }
        })?;
        // Every later pass over the tree (and the interpreter) recurses once per level: a
        // deeper tree is refused here, before one of them runs out of stack.
        if let Some(depth) = too_deep(&ast) {
            return Err((
                format!(
                    "the expression nests {depth} levels deep (each operator of a chain such as `a + b + c`, field selection and call is a level), more than the limit of {MAX_AST_DEPTH}: split it, or name its parts as variables"
                ),
                None,
            ));
        }
        if let Some(why) = unsupported(&ast) {
            return Err((why.to_string(), None));
        }
        let path = PathExpr::of(&ast).map(Arc::new);
        let direct = Direct::of(&ast).map(Arc::new);
        route_equality(&mut ast);
        crate::cost::instrument(&mut ast);
        let mut refs: Vec<String> = ast
            .references()
            .variables()
            .into_iter()
            .map(str::to_string)
            .collect();
        refs.sort();
        let reads = |name: &str| {
            let mut r = FieldReads::Fields(BTreeSet::new());
            field_reads(&ast, name, &mut r);
            Arc::new(r)
        };
        Ok(Expr {
            text: Arc::from(text),
            fragment_reads: reads("fragments"),
            param_reads: reads("params"),
            ast: Arc::new(ast),
            refs: Arc::new(refs),
            path,
            direct,
        })
    }

    /// The source text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The identifiers the expression reads (sorted), e.g. `["value"]` for `value >= 400`,
    /// including a comprehension's own variables and CEL's type names; see
    /// [`Expr::free_names`] for the names a caller must bind.
    pub fn references(&self) -> &[String] {
        &self.refs
    }

    /// The calls of functions and methods the interpreter does not know, in the order the
    /// parser met them (each once): `sizee(x)`, `q.isBiggerThan(r)`, `sets.contains(…)`.
    /// Operators, macros (expanded by the parser) and our own functions are known. Found by
    /// asking the interpreter to resolve a call of the same shape with null operands, so the
    /// answer is the interpreter's, whatever its version registers.
    pub(crate) fn unknown_calls(&self) -> Vec<UnknownCall> {
        fn walk(e: &IdedExpr, bound: &mut Vec<String>, out: &mut Vec<UnknownCall>) {
            match &e.expr {
                AstExpr::Call(c) => {
                    let name = c.func_name.as_str();
                    let plain = name
                        .chars()
                        .next()
                        .is_some_and(|ch| ch.is_ascii_alphabetic())
                        && name
                            .chars()
                            .all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '.');
                    if plain {
                        let nulls = vec!["null"; c.args.len()].join(", ");
                        let member = format!("null.{name}({nulls})");
                        let found = match c.target.as_deref().map(|t| &t.expr) {
                            None => probe_undeclared(&format!("{name}({nulls})"))
                                .map(|_| UnknownCall::Function(name.to_string())),
                            // A variable (`variables.x` is read as a binding of its own)
                            // or a comprehension's is a value, not a namespace.
                            Some(AstExpr::Ident(x))
                                if !bound.contains(x) && !x.starts_with(VARIABLE_PREFIX) =>
                            {
                                match probe_undeclared(&format!("{x}.{name}({nulls})")) {
                                    Some(u) if u == *x => Some(match probe_undeclared(&member) {
                                        Some(_) => UnknownCall::Function(name.to_string()),
                                        None => UnknownCall::Qualified {
                                            target: x.clone(),
                                            function: name.to_string(),
                                        },
                                    }),
                                    Some(_) => Some(UnknownCall::Function(name.to_string())),
                                    None => None,
                                }
                            }
                            Some(_) => probe_undeclared(&member)
                                .map(|_| UnknownCall::Function(name.to_string())),
                        };
                        if let Some(f) = found
                            && !out.contains(&f)
                        {
                            out.push(f);
                        }
                    }
                    if let Some(t) = &c.target {
                        walk(t, bound, out);
                    }
                    for a in &c.args {
                        walk(a, bound, out);
                    }
                }
                AstExpr::Comprehension(c) => {
                    walk(&c.iter_range, bound, out);
                    walk(&c.accu_init, bound, out);
                    let depth = bound.len();
                    bound.push(c.iter_var.clone());
                    bound.extend(c.iter_var2.iter().cloned());
                    bound.push(c.accu_var.clone());
                    for x in [&c.loop_cond, &c.loop_step, &c.result] {
                        walk(x, bound, out);
                    }
                    bound.truncate(depth);
                }
                _ => crate::cost::children(e, &mut |child| walk(child, bound, out)),
            }
        }
        let mut out = Vec::new();
        walk(&self.ast, &mut Vec::new(), &mut out);
        out
    }

    /// What is wrong with each call of a function or method the interpreter does not know
    /// (`sizee is not a function or method of the CEL library here` for `sizee(x) == 0`), and
    /// of each `ns.f(…)` whose `ns` is neither a namespace of the library nor one of `names`
    /// (`sets.contains is not a function of the CEL library here`), each once: a caller that
    /// compiles an expression of its own (a rule test's invariant, over the names it binds)
    /// refuses it as the rule loader does.
    pub fn unknown_functions(&self, names: &[&str]) -> Vec<String> {
        self.unknown_calls()
            .into_iter()
            .filter(|c| match c {
                UnknownCall::Function(_) => true,
                UnknownCall::Qualified { target, .. } => !names.contains(&target.as_str()),
            })
            .map(|c| c.text())
            .collect()
    }

    /// The names the expression needs bound, in the order the parser met them: the
    /// identifiers it reads less a comprehension's own variables (`x` in `l.all(x, x > 1)`),
    /// the namespaces of functions (`lists.range`) and CEL's type names (`double`, `map`).
    /// A caller that binds a fixed set of variables refuses any other.
    pub fn free_names(&self) -> Vec<String> {
        crate::sites::free_value_identifiers(self)
            .into_iter()
            .filter(|n| !crate::sites::CEL_TYPES.contains(&n.as_str()))
            .collect()
    }

    /// The fields of binding `name` the expression selects (`gen.n`, `gen['n']`, `gen[?'n']`),
    /// sorted; `None` when it uses `name` whole (passes it on, iterates it, indexes it by a
    /// computed key), so that any field may be read.
    pub fn selected_fields(&self, name: &str) -> Option<Vec<String>> {
        let mut r = FieldReads::Fields(BTreeSet::new());
        field_reads(&self.ast, name, &mut r);
        match r {
            FieldReads::Fields(f) => Some(f.into_iter().collect()),
            FieldReads::All => None,
        }
    }

    /// True when the expression may observe the field at `keys` of the binding `name` (e.g.
    /// `object`, `["spec", "overrides"]`): it selects that field, a field above it (a value
    /// holding it) or below it, or uses `name` in any way this reading cannot follow.
    pub(crate) fn may_observe(&self, name: &str, keys: &[&str]) -> bool {
        may_observe(&self.ast, name, keys)
    }

    /// Which params the expression reads.
    pub(crate) fn param_reads(&self) -> &FieldReads {
        &self.param_reads
    }

    /// Which fragments the expression reads.
    pub(crate) fn fragment_reads(&self) -> &FieldReads {
        &self.fragment_reads
    }

    /// `x` when the expression is exactly `params.x`: a read whose value, a string, a
    /// template carries unchanged into what it renders.
    pub(crate) fn bare_param(&self) -> Option<&str> {
        let is_params = |x: &IdedExpr| matches!(&x.expr, AstExpr::Ident(n) if n == "params");
        match &self.ast.expr {
            AstExpr::Select(s) if !s.test && is_params(&s.operand) => Some(&s.field),
            // `params['x']`
            AstExpr::Call(c) if c.func_name == operators::INDEX && c.target.is_none() => {
                match c.args.as_slice() {
                    [operand, key] if is_params(operand) => match &key.expr {
                        AstExpr::Literal(LiteralValue::String(k)) => Some(k.inner()),
                        _ => None,
                    },
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// True when the expression reads a pack variable or fragment.
    pub(crate) fn reads_variables_or_fragments(&self) -> bool {
        self.refs
            .iter()
            .any(|r| r.starts_with(VARIABLE_PREFIX) || r == "variables" || r == "fragments")
    }

    /// True when the expression only selects into a binding (`variables.x`, `object.spec.env`):
    /// cheap to evaluate, whatever the binding holds.
    pub(crate) fn only_selects(&self) -> bool {
        self.path.is_some() || matches!(self.ast.expr, AstExpr::Ident(_))
    }

    /// True when the expression names binding `name` (a comprehension's own variable of that
    /// name counts too).
    pub(crate) fn reads_name(&self, name: &str) -> bool {
        self.refs.binary_search_by(|r| r.as_str().cmp(name)).is_ok()
    }

    /// The parsed expression (as rewritten for evaluation), for reference analysis.
    pub(crate) fn ast(&self) -> &cel::parser::Expression {
        &self.ast
    }

    /// Evaluates against `scope`.
    ///
    /// # Errors
    /// The evaluation error as text (no such key, wrong type, …), or the failure of a variable
    /// or fragment the expression reads.
    pub fn eval(&self, scope: &Scope) -> Result<Cel, EvaluationError> {
        self.eval_checked(scope).map_err(|e| EvaluationError {
            message: e.to_string(),
        })
    }

    /// Evaluates against `scope`; reading a failed variable or fragment fails without running.
    pub(crate) fn eval_checked(&self, scope: &Scope) -> Result<Cel, EvalError> {
        if let Some(answer) = self.eval_direct(scope, |d, c| d.eval_scalar(scope, c)) {
            return answer;
        }
        self.eval_with(scope, crate::view::to_cel)
    }

    /// The answer of the direct form through `eval`, charged to the cost meter, when the
    /// expression has one and it answers; reading a failed variable or fragment fails first.
    /// `None`: the interpreter evaluates the expression.
    fn eval_direct<T>(
        &self,
        scope: &Scope,
        eval: impl FnOnce(&Direct, &mut Charges) -> Option<T>,
    ) -> Option<Result<T, EvalError>> {
        let d = self.direct.as_ref()?;
        if let Some(e) = scope.upstream_failure(self) {
            return Some(Err(e));
        }
        let mut charges = Charges::new();
        let answer = eval(d, &mut charges)?;
        Some(charge_direct(charges).map(|()| answer))
    }

    /// Evaluates against `scope` and hands the result, still borrowing the scope's documents,
    /// to `take`; reading a failed variable or fragment fails without running.
    fn eval_with<R>(
        &self,
        scope: &Scope,
        take: impl FnOnce(&dyn Val) -> Result<R, String>,
    ) -> Result<R, EvalError> {
        if let Some(e) = scope.upstream_failure(self) {
            return Err(e);
        }
        let root: &cel::Context<'_, '_> = &ROOT;
        let (result, spent) = crate::cost::measure(|| {
            let mut ctx = root.new_inner_scope();
            ctx.set_variable_resolver(scope);
            match Cel::resolve_val(&self.ast, &ctx) {
                Ok(v) => take(v.as_ref()),
                Err(e) => Err(execution_error_text(&e)),
            }
        });
        // A spent budget decides even when `||`/`&&` dropped the error it raised.
        if let Some(budget) = spent {
            return Err(EvalError::Own(budget.message()));
        }
        // A deferred binding it read that could not be made: that reason, not the
        // interpreter's (which finds the name unresolved).
        if result.is_err()
            && let Some(failure) = scope.deferred_failure(self)
        {
            return Err(failure);
        }
        result.map_err(EvalError::Own)
    }

    /// One trial evaluation against `scope`, telling a type error from the rest: `Ok(Some(v))`
    /// the value; `Ok(None)` an error that depends on the values, not their types (division
    /// by zero, overflow, an index out of bounds, a missing key, a spent budget) or a failed
    /// variable it reads; `Err` a type error, in the words of [`Expr::eval`]: an operator,
    /// function or method given operands it has no overload for (`operator '||' does not take
    /// bool and string`), values that cannot be compared, a selection or index into a value
    /// that has none, an undeclared name. CEL here has no type checker: evaluating at chosen
    /// values is how callers find an expression that can never be well typed on the branches
    /// those values take.
    ///
    /// # Errors
    /// The type error's message.
    pub fn trial(&self, scope: &Scope) -> Result<Option<Cel>, String> {
        if scope.upstream_failure(self).is_some() {
            return Ok(None);
        }
        let root: &cel::Context<'_, '_> = &ROOT;
        let (found, _spent) = crate::cost::measure(|| {
            let mut ctx = root.new_inner_scope();
            ctx.set_variable_resolver(scope);
            match Cel::resolve_val(&self.ast, &ctx) {
                Ok(v) => Ok(crate::view::to_cel(v.as_ref()).ok()),
                Err(e) if is_type_error(&e) => Err(execution_error_text(&e)),
                Err(_) => Ok(None),
            }
        });
        found
    }

    /// The place of `v` when it is a view of a mapping or list of a document this expression
    /// reads (a bound document, or a variable kept as JSON that has been evaluated): the
    /// value is then kept as that place, as a [`PathExpr`] variable is, not copied. `None`
    /// for any other value, or a place not found within [`PLACE_SEARCH_NODES`] nodes.
    fn place_of(&self, v: &dyn Val, scope: &Scope) -> Option<(Arc<Value>, Arc<[String]>)> {
        let node = json_node(v)?;
        for r in self.refs.iter() {
            // A variable not evaluated yet holds nothing this value can be part of.
            let Some((root, base)) = scope.json_place(r, false) else {
                continue;
            };
            let Some(start) = at_path(root, base) else {
                continue;
            };
            let mut path = base.to_vec();
            if place_in(start, node, &mut path, &mut PLACE_SEARCH_NODES.clone()) {
                return Some((root.clone(), Arc::from(path)));
            }
        }
        None
    }

    /// Evaluates a `forEach.in` expression: a list JSON holds keeps its place (an expression
    /// that only selects into a bound document, [`PathExpr`]) or is stored as JSON once, so
    /// its items are bound in place and no item is converted; anything else is converted as
    /// [`Expr::eval_checked`] converts it.
    pub(crate) fn eval_list(&self, scope: &Scope) -> Result<Listed, EvalError> {
        let place = match (&self.path, &self.ast.expr) {
            (Some(p), _) => p.walk(scope),
            // A variable or a bound name, whole (`variables.labels`).
            (None, AstExpr::Ident(name)) => {
                scope
                    .json_place(name, true)
                    .map(|(root, path)| Stored::Json {
                        root: root.clone(),
                        path: Arc::from(path),
                    })
            }
            _ => None,
        };
        // A list the expression builds of scalars and lists of them, in direct form.
        if place.is_none()
            && let Some(answer) = self.eval_direct(scope, |d, c| d.eval_built_list(scope, c))
        {
            let items = answer?;
            return Ok(Listed::At {
                len: items.len(),
                root: Arc::new(Value::Array(items)),
                path: Arc::from(Vec::new()),
            });
        }
        if let Some(Stored::Json { root, path }) = place {
            match at_path(&root, &path) {
                Some(Value::Array(items)) => {
                    return Ok(Listed::At {
                        len: items.len(),
                        root: root.clone(),
                        path,
                    });
                }
                // A mapping is iterated over its keys: only those are made CEL values.
                Some(Value::Object(m)) => {
                    return Ok(Listed::Keys(sorted_keys(
                        m.keys().map(|k| Cel::String(Arc::new(k.clone()))),
                    )));
                }
                Some(Value::Null) => return Ok(Listed::Cel(Cel::Null)),
                _ => {}
            }
        }
        let value = self.eval_with(scope, |v| {
            Ok(match v.get_type().kind() {
                Kind::List => match self.place_of(v, scope) {
                    Some((root, path)) => Ok(Ok((root, path))),
                    None => match crate::view::to_json(v) {
                        Some(json) => Ok(Err(json)),
                        None => Err(crate::view::to_cel(v)?),
                    },
                },
                _ => Err(crate::view::to_cel(v)?),
            })
        })?;
        Ok(match value {
            Ok(Ok((root, path))) => Listed::At {
                len: at_path(&root, &path)
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len),
                root,
                path,
            },
            Ok(Err(json)) => Listed::At {
                len: json.as_array().map_or(0, Vec::len),
                root: Arc::new(json),
                path: Arc::from(Vec::new()),
            },
            Err(cel) => Listed::Cel(cel),
        })
    }

    /// Evaluates and requires a bool.
    ///
    /// # Errors
    /// Evaluation errors, or `expected bool, got <type>`.
    pub fn eval_bool(&self, scope: &Scope) -> Result<bool, EvaluationError> {
        self.eval_bool_checked(scope).map_err(|e| EvaluationError {
            message: e.to_string(),
        })
    }

    /// [`Expr::eval_bool`], keeping upstream failures apart.
    pub(crate) fn eval_bool_checked(&self, scope: &Scope) -> Result<bool, EvalError> {
        if let Some(answer) = self.eval_direct(scope, |d, c| d.eval_bool(scope, c)) {
            return answer;
        }
        self.eval_with(scope, |v| match v.downcast_ref::<CelBool>() {
            Some(b) => Ok(*b.inner()),
            None => Err(format!(
                "expected bool, got {}",
                crate::view::val_type_name(v)
            )),
        })
    }

    /// Evaluates and converts the result to JSON.
    ///
    /// # Errors
    /// Evaluation errors, or a value JSON cannot hold (a function, bytes, …).
    pub fn eval_json(&self, scope: &Scope) -> Result<Value, EvaluationError> {
        Ok(cel_to_json(&self.eval(scope)?)?)
    }
}

/// Makes the charges of an expression evaluated in direct form, in the interpreter's order, as
/// one evaluation: the spent budget's error when one ran out.
pub(crate) fn charge_direct(charges: Charges) -> Result<(), EvalError> {
    let list = charges.into_list();
    if list.is_empty() {
        return Ok(());
    }
    let ((), spent) = crate::cost::measure(|| {
        for c in list {
            let made = match c {
                Charge::Regex(bytes) => crate::cost::charge_regex(bytes),
                Charge::Units(units) => crate::cost::charge(units),
            };
            if made.is_err() {
                break;
            }
        }
    });
    spent.map_or(Ok(()), |budget| Err(EvalError::Own(budget.message())))
}

/// Adds to `out` the fields of identifier `name` that `e` selects; any other use of `name`
/// (passed whole, iterated, indexed by a computed key) makes it [`FieldReads::All`].
fn field_reads(e: &IdedExpr, name: &str, out: &mut FieldReads) {
    let is_name = |x: &IdedExpr| matches!(&x.expr, AstExpr::Ident(n) if n == name);
    match &e.expr {
        AstExpr::Ident(n) if n == name => *out = FieldReads::All,
        AstExpr::Ident(_) | AstExpr::Literal(_) | AstExpr::Unspecified => {}
        AstExpr::Select(s) if is_name(&s.operand) => {
            out.merge(&FieldReads::Fields(BTreeSet::from([s.field.clone()])));
        }
        AstExpr::Select(s) => field_reads(&s.operand, name, out),
        AstExpr::Call(c) => {
            if let (true, [operand, key]) = (
                c.func_name == operators::INDEX || c.func_name == operators::OPT_INDEX,
                c.args.as_slice(),
            ) && let (true, AstExpr::Literal(LiteralValue::String(k))) =
                (is_name(operand), &key.expr)
            {
                out.merge(&FieldReads::Fields(BTreeSet::from([k.inner().to_string()])));
                return;
            }
            // `'x' in name` tests the one field, as `has(name.x)` does.
            if let (true, [key, operand]) = (
                c.func_name == operators::IN || c.func_name == MEMBER_FUNCTION,
                c.args.as_slice(),
            ) && let (true, AstExpr::Literal(LiteralValue::String(k))) =
                (is_name(operand), &key.expr)
            {
                out.merge(&FieldReads::Fields(BTreeSet::from([k.inner().to_string()])));
                return;
            }
            if let Some(t) = &c.target {
                field_reads(t, name, out);
            }
            for a in &c.args {
                field_reads(a, name, out);
            }
        }
        AstExpr::Comprehension(c) => {
            for x in [
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ] {
                field_reads(x, name, out);
            }
        }
        AstExpr::List(l) => {
            for x in &l.elements {
                field_reads(x, name, out);
            }
        }
        AstExpr::Map(m) => entry_reads(&m.entries, name, out),
        AstExpr::Struct(s) => entry_reads(&s.entries, name, out),
    }
}

/// The literal field path `e` selects from identifier `name` (`name.a`, `name[?'a']`,
/// `name['a'].b`: `["a", "b"]`), or `None` when `e` is no such selection.
fn selection<'e>(e: &'e IdedExpr, name: &str) -> Option<Vec<&'e str>> {
    match &e.expr {
        AstExpr::Ident(n) if n == name => Some(Vec::new()),
        AstExpr::Select(s) => {
            let mut path = selection(&s.operand, name)?;
            path.push(&s.field);
            Some(path)
        }
        AstExpr::Call(c)
            if c.target.is_none()
                && (c.func_name == operators::INDEX || c.func_name == operators::OPT_INDEX) =>
        {
            let [operand, key] = c.args.as_slice() else {
                return None;
            };
            let AstExpr::Literal(LiteralValue::String(k)) = &key.expr else {
                return None;
            };
            let mut path = selection(operand, name)?;
            path.push(k.inner());
            Some(path)
        }
        _ => None,
    }
}

/// True when `e` may observe the field at `keys` of identifier `name`: a selection of a field
/// on that path (above it, it or below it), or any other use of `name` (passed whole, indexed
/// by a computed key, shadowed by a comprehension variable: counted as a read too).
fn may_observe(e: &IdedExpr, name: &str, keys: &[&str]) -> bool {
    if let Some(path) = selection(e, name) {
        return path.iter().zip(keys).all(|(a, b)| a == b);
    }
    let entries = |entries: &[IdedEntryExpr]| {
        entries.iter().any(|entry| match &entry.expr {
            EntryExpr::StructField(f) => may_observe(&f.value, name, keys),
            EntryExpr::MapEntry(m) => {
                may_observe(&m.key, name, keys) || may_observe(&m.value, name, keys)
            }
        })
    };
    match &e.expr {
        AstExpr::Ident(_) | AstExpr::Literal(_) | AstExpr::Unspecified => false,
        AstExpr::Select(s) => may_observe(&s.operand, name, keys),
        AstExpr::Call(c) => {
            c.target
                .as_deref()
                .is_some_and(|t| may_observe(t, name, keys))
                || c.args.iter().any(|a| may_observe(a, name, keys))
        }
        AstExpr::Comprehension(c) => [
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ]
        .into_iter()
        .any(|x| may_observe(x, name, keys)),
        AstExpr::List(l) => l.elements.iter().any(|x| may_observe(x, name, keys)),
        AstExpr::Map(m) => entries(&m.entries),
        AstExpr::Struct(s) => entries(&s.entries),
    }
}

/// Why `e` cannot be evaluated, for the forms the parser accepts but the interpreter does not
/// implement (it would panic on them mid-check): message literals (`Foo{a: 1}`, also
/// `google.protobuf.Int64Value{value: 1}`) and an incomplete expression.
/// The longest expression text an error message quotes whole; a longer one is cut there.
const SHOWN_MAX: usize = 200;

/// `text` as an error message quotes it: whitespace runs as one space, and past [`SHOWN_MAX`]
/// characters cut with `…` (a message repeated for each rule that reads a failed variable
/// stays readable; the rule file has the whole text).
pub(crate) fn shown(text: &str) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match one_line.char_indices().nth(SHOWN_MAX) {
        Some((cut, _)) => format!("{}…", &one_line[..cut]),
        None => one_line,
    }
}

/// The deepest expression tree accepted: cel-go's parser refuses deeper ones too (its default
/// maximum recursion depth is 250).
pub const MAX_AST_DEPTH: usize = 250;

/// The depth of `e`'s tree when it is more than [`MAX_AST_DEPTH`] (measured without recursion,
/// so that any tree the parser built can be).
fn too_deep(e: &IdedExpr) -> Option<usize> {
    let mut stack = vec![(e, 1usize)];
    let mut deepest = 0;
    while let Some((node, depth)) = stack.pop() {
        deepest = deepest.max(depth);
        crate::cost::children(node, &mut |c| stack.push((c, depth + 1)));
    }
    (deepest > MAX_AST_DEPTH).then_some(deepest)
}

fn unsupported(e: &IdedExpr) -> Option<&'static str> {
    const STRUCT: &str = "message literals such as `Foo{a: 1}` are not supported: rules work on \
        JSON documents; write a map literal such as `{'a': 1}`";
    match &e.expr {
        AstExpr::Struct(_) => return Some(STRUCT),
        AstExpr::Unspecified => return Some("the expression is incomplete"),
        AstExpr::Map(m)
            if m.entries
                .iter()
                .any(|x| matches!(x.expr, EntryExpr::StructField(_))) =>
        {
            return Some(STRUCT);
        }
        _ => {}
    }
    let mut found = None;
    crate::cost::children(e, &mut |c| {
        if found.is_none() {
            found = unsupported(c);
        }
    });
    found
}

/// The function `==` is routed to (see [`route_equality`]).
const EQUALS_FUNCTION: &str = "@eq";
/// The function `!=` is routed to.
const NOT_EQUALS_FUNCTION: &str = "@ne";
/// The function `in` is routed to.
pub(crate) const MEMBER_FUNCTION: &str = "@member";
/// The functions `<`, `<=`, `>` and `>=` are routed to, with the operator each stands for.
const ORDER_FUNCTIONS: [(&str, &str); 4] = [
    ("@lt", operators::LESS),
    ("@le", operators::LESS_EQUALS),
    ("@gt", operators::GREATER),
    ("@ge", operators::GREATER_EQUALS),
];

/// Routes every `==`, `!=` and `in` of `e` to our own functions: the interpreter asks the left
/// operand only, and its own maps do not know a map that views a document in place, so
/// `{'a': 1} == object.m` would be false where `object.m == {'a': 1}` is true, and so would
/// `object.m in [{'a': 1}]`. Ours ask the other side too. `<`, `<=`, `>` and `>=` go to ours
/// as well: the interpreter refuses to order a NaN (`operator '>' does not take double and
/// double`), where CEL makes every such comparison false. No rule can name them (`@` starts
/// no CEL identifier).
fn route_equality(e: &mut IdedExpr) {
    if let AstExpr::Call(c) = &mut e.expr
        && c.target.is_none()
        && c.args.len() == 2
    {
        if c.func_name == operators::EQUALS {
            c.func_name = EQUALS_FUNCTION.to_string();
        } else if c.func_name == operators::NOT_EQUALS {
            c.func_name = NOT_EQUALS_FUNCTION.to_string();
        } else if c.func_name == operators::IN {
            c.func_name = MEMBER_FUNCTION.to_string();
        } else if let Some((name, _)) = ORDER_FUNCTIONS
            .iter()
            .find(|(_, op)| *op == c.func_name.as_str())
        {
            c.func_name = (*name).to_string();
        }
    }
    crate::cost::children_mut(e, &mut route_equality);
}

/// Adds `name` as a two-operand boolean function: `holds(a, b)` is its value.
fn add_binary(
    ctx: &mut cel::Context<'static, 'static>,
    name: &str,
    holds: impl Fn(&dyn Val, &dyn Val) -> Result<bool, ExecutionError> + Send + Sync + 'static,
) {
    add_raw(
        ctx,
        name,
        Box::new(move |ftx| {
            let ops = operands(ftx);
            let [a, b] = ops.as_slice() else {
                return Err(ExecutionError::invalid_argument_count(2, ops.len()));
            };
            Ok(CowVal::owned(CelBool::from(holds(*a, *b)?)))
        }),
    );
}

/// The error of operator `op` given operands it has no overload for, naming their types as a
/// rule author writes them.
fn no_overload(op: &str, operands: [&dyn Val; 2]) -> ExecutionError {
    ExecutionError::no_such_overload(
        op,
        operands
            .iter()
            .map(|v| crate::view::val_type_name(*v).to_string())
            .collect(),
    )
}

/// `@eq(a, b)` and `@ne(a, b)`: CEL equality, whichever side views a document; `<`, `<=`, `>`,
/// `>=`; and `in`.
fn register_equality(ctx: &mut cel::Context<'static, 'static>) {
    for (name, equal) in [(EQUALS_FUNCTION, true), (NOT_EQUALS_FUNCTION, false)] {
        add_binary(ctx, name, move |a, b| {
            Ok((a.equals(b) || b.equals(a)) == equal)
        });
    }
    // `a < b` and the others: the interpreter's own ordering, except that a NaN beside a number
    // orders nothing (false), as in every CEL implementation and IEEE 754.
    for (name, op) in ORDER_FUNCTIONS {
        add_binary(ctx, name, move |a, b| {
            let number =
                |v: &dyn Val| matches!(v.get_type().kind(), Kind::Int | Kind::UInt | Kind::Double);
            let nan = |v: &dyn Val| {
                v.downcast_ref::<cel::common::types::CelDouble>()
                    .is_some_and(|d| d.inner().is_nan())
            };
            if (nan(a) && number(b)) || (nan(b) && number(a)) {
                return Ok(false);
            }
            let order = a
                .as_comparer()
                .ok_or_else(|| no_overload(op, [a, b]))?
                .compare(b)
                .map_err(|e| match e {
                    ExecutionError::NoSuchOverload(_)
                    | ExecutionError::ValuesNotComparable(..)
                    | ExecutionError::UnsupportedKeyType(_)
                    | ExecutionError::UnexpectedType { .. } => no_overload(op, [a, b]),
                    other => other,
                })?;
            Ok(match op {
                operators::LESS => order.is_lt(),
                operators::LESS_EQUALS => order.is_le(),
                operators::GREATER => order.is_gt(),
                _ => order.is_ge(),
            })
        });
    }
    // `x in list` is true when some element equals `x` as `==` has it; `k in map` is the map's
    // own key lookup.
    add_binary(ctx, MEMBER_FUNCTION, |x, c| {
        match (c.get_type().kind(), c.as_iterable(), c.as_container()) {
            (Kind::List, Some(items), _) => {
                let mut items = items.iter();
                Ok(std::iter::from_fn(|| items.next()).any(|e| x.equals(e) || e.equals(x)))
            }
            (_, _, Some(container)) => container.contains(x),
            _ => Err(no_overload(operators::IN, [x, c])),
        }
    });
}

fn entry_reads(entries: &[IdedEntryExpr], name: &str, out: &mut FieldReads) {
    for entry in entries {
        match &entry.expr {
            EntryExpr::StructField(f) => field_reads(&f.value, name, out),
            EntryExpr::MapEntry(m) => {
                field_reads(&m.key, name, out);
                field_reads(&m.value, name, out);
            }
        }
    }
}

/// Rewrites optional field selection `a.?b` into the equivalent optional index `a[?'b']`, and
/// `variables.name` into the identifier `__variables__name`.
///
/// The two are defined as equivalent by the CEL optional-types spec; the rewrite keeps one form
/// for the analyses of the AST (field reads, cost, sites). String literals are left untouched.
fn rewrite_optional_select(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len() + 8);
    let mut i = 0;
    // Start of the text not yet copied to `out`; every cut is at an ASCII byte.
    let mut copied = 0;
    while let Some(&c) = b.get(i) {
        if let Some(end) = string_literal_end(b, i) {
            i = end;
            continue;
        }
        // `variables.name` → `__variables__name`: each variable is its own binding, so a failed
        // variable fails only the expressions that read it, and reading one builds no map.
        if c == b'v'
            && b.get(i..i + 10) == Some(b"variables.".as_slice())
            && !i
                .checked_sub(1)
                .and_then(|p| b.get(p))
                .is_some_and(|p| is_ident_byte(*p) || *p == b'.')
        {
            let end = ident_end(b, i + 10);
            if end > i + 10 {
                out.push_str(text.get(copied..i).unwrap_or(""));
                out.push_str(VARIABLE_PREFIX);
                out.push_str(text.get(i + 10..end).unwrap_or(""));
                i = end;
                copied = end;
                continue;
            }
        }
        if c == b'.' && b.get(i + 1) == Some(&b'?') {
            let end = ident_end(b, i + 2);
            if end > i + 2 {
                out.push_str(text.get(copied..i).unwrap_or(""));
                out.push_str("[?'");
                out.push_str(text.get(i + 2..end).unwrap_or(""));
                out.push_str("']");
                i = end;
                copied = end;
                continue;
            }
        }
        if is_ident_byte(c) {
            // Skip the whole identifier, so `xvariables.y` or `fr'…'` are not mistaken.
            i = ident_end(b, i);
            continue;
        }
        i += 1;
    }
    out.push_str(text.get(copied..).unwrap_or(""));
    out
}

pub(crate) fn is_ident_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The index just past the identifier starting at `start` (letters, digits, `_`).
fn ident_end(b: &[u8], start: usize) -> usize {
    let mut end = start;
    while b.get(end).copied().is_some_and(is_ident_byte) {
        end += 1;
    }
    end
}

/// When a CEL string or bytes literal starts at `i`, the index just past it (`b.len()` when it
/// is unterminated); `None` when none starts there.
///
/// Handles the `r`/`R` (raw: no escapes) and `b`/`B` prefixes, single, double and triple
/// quotes, and backslash escapes in non-raw literals. `i` must not be inside an identifier.
fn string_literal_end(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i;
    let mut raw = false;
    while j < i + 2 {
        match b.get(j) {
            Some(b'r' | b'R') => raw = true,
            Some(b'b' | b'B') => {}
            _ => break,
        }
        j += 1;
    }
    let q = match b.get(j) {
        Some(&q @ (b'\'' | b'"')) => q,
        _ => return None,
    };
    let triple = b.get(j + 1) == Some(&q) && b.get(j + 2) == Some(&q);
    let mut k = if triple { j + 3 } else { j + 1 };
    loop {
        match b.get(k) {
            None => return Some(b.len()),
            Some(b'\\') if !raw => k += 2,
            Some(&c) if c == q => {
                if !triple {
                    return Some(k + 1);
                }
                if b.get(k + 1) == Some(&q) && b.get(k + 2) == Some(&q) {
                    return Some(k + 3);
                }
                k += 1;
            }
            Some(_) => k += 1,
        }
    }
}

/// The byte index of the `}}` that closes a template expression starting at `from` in `s`:
/// the first `}}` outside string literals and outside braces the expression opened.
fn template_close(s: &str, from: usize) -> Option<usize> {
    let b = s.as_bytes();
    let mut depth = 0usize;
    let mut i = from;
    while let Some(&c) = b.get(i) {
        if let Some(end) = string_literal_end(b, i) {
            i = end;
            continue;
        }
        match c {
            // Identifiers are skipped whole: a prefix letter inside one starts no literal.
            c if is_ident_byte(c) => {
                i = ident_end(b, i);
                continue;
            }
            b'{' => depth += 1,
            b'}' if depth > 0 => depth -= 1,
            b'}' if b.get(i + 1) == Some(&b'}') => return Some(i),
            _ => {}
        }
        i += 1;
    }
    None
}

/// Variables visible to an expression: top-level names bound to JSON documents or CEL values.
///
/// A JSON document is bound as it is (shared, not copied, when bound with
/// [`Scope::bind_shared`]) and read in place by every expression evaluated in the scope (see
/// `engine/src/view.rs`); a CEL value is converted to the interpreter's form once, when bound.
/// Cloning a scope clones pointers only. Names are CEL identifiers: a name with a dot is
/// never read.
///
/// A scope also records the variables and fragments that could not be evaluated: an expression
/// that reads one fails with that one's message instead of running (fail closed).
#[derive(Default, Clone)]
pub struct Scope {
    /// Shared with the scopes cloned from this one until one of them binds (a rule's scope is
    /// a clone of its pack's, and most rules bind nothing here).
    bound: Arc<BTreeMap<String, Bound>>,
    /// Failed bindings (`objects`, `fragments.<name>`, a value CEL cannot hold) → why; shared as
    /// `bound` is.
    failed: Arc<BTreeMap<String, EvalError>>,
    /// The variables and `variables` maps bound, newest first: shared with the scopes they were
    /// bound in, so binding one or cloning the scope copies no other.
    vars: Option<Arc<VarNode>>,
}

/// A pack's or a rule's variables as [`Scope::bind_variables`] binds them, made once per loaded
/// rule set (when the pack or rule is first evaluated): each variable's name, binding
/// (`__variables__<name>`) and expression, in declaration order, and the sorted names the
/// `variables` map holds (a rule's own and its pack's).
#[derive(Debug, Clone)]
pub(crate) struct VarBindings {
    vars: Vec<VarBinding>,
    names: Arc<[String]>,
    map: Arc<str>,
}

/// One variable of [`VarBindings`].
#[derive(Debug, Clone)]
struct VarBinding {
    name: Arc<str>,
    /// `__variables__<name>`.
    binding: Arc<str>,
    expr: Expr,
    /// The shared value, when the variable is constant.
    constant: Option<Arc<ConstCell>>,
}

/// The value of a constant variable ([`VarBindings::new`]), computed for the first document
/// that reads it and shared by every later one: the JSON value, its place, and the CEL cost it
/// took, which each later document is charged again. Empty until a computation succeeds;
/// `None` when the value is not one JSON holds (it is computed each time then).
type ConstCell = OnceLock<Option<(Arc<Value>, Arc<[String]>, u64)>>;

impl VarBindings {
    /// `vars` in order, with a `variables` map of their names and the names in `visible`. A
    /// variable whose expression reads nothing but literals and earlier such variables (a
    /// policy table written as a CEL map: the workload lint's field types, queue keys) is
    /// constant: its value is the same for every document, so it is computed once.
    pub(crate) fn new<'a>(
        vars: &[(String, Expr)],
        visible: impl IntoIterator<Item = &'a String>,
    ) -> VarBindings {
        let mut names: std::collections::BTreeSet<&String> = visible.into_iter().collect();
        names.extend(vars.iter().map(|(n, _)| n));
        let mut constant: Vec<String> = Vec::new();
        VarBindings {
            vars: vars
                .iter()
                .map(|(n, e)| {
                    let binding = Arc::from(format!("{VARIABLE_PREFIX}{n}"));
                    let cell = is_constant(e, &constant).then(|| {
                        constant.push(format!("{VARIABLE_PREFIX}{n}"));
                        Arc::new(ConstCell::new())
                    });
                    VarBinding {
                        name: Arc::from(n.as_str()),
                        binding,
                        expr: e.clone(),
                        constant: cell,
                    }
                })
                .collect(),
            names: names.into_iter().cloned().collect(),
            map: Arc::from("variables"),
        }
    }
}

/// Whether `e` reads nothing but the variables `constant` (bindings, `__variables__<name>`):
/// no document, item, parameter or fragment, nor the `variables` map; only the identifiers its
/// own comprehensions bind and CEL's type names besides. (A receiver such as `key` of
/// `key.split('/')` is read too; so is a function namespace such as `lists`, which makes an
/// expression that calls one count as not constant: never wrongly constant.)
fn is_constant(e: &Expr, constant: &[String]) -> bool {
    let variables_ok = e
        .refs
        .iter()
        .all(|r| !r.starts_with(VARIABLE_PREFIX) || constant.iter().any(|c| c == r));
    variables_ok
        && !e.refs.iter().any(|r| r == "variables")
        && crate::sites::free_identifiers(e)
            .iter()
            .all(|n| n == "variables" || crate::sites::CEL_TYPES.contains(&n.as_str()))
}

/// One lazy binding of a [`Scope`], and the ones bound before it.
struct VarNode {
    /// `__variables__<name>`, or `variables` for the map.
    binding: Arc<str>,
    lazy: Lazy,
    next: Option<Arc<VarNode>>,
}

impl Drop for VarNode {
    // Unlinks the list one node at a time: a long chain of variables must not drop recursively.
    fn drop(&mut self) {
        // The binding's own scope shares the rest of the list: let go of it first, so that
        // `next` below is the last holder of the node it points to.
        match &mut self.lazy.how {
            LazyHow::Var { scope, .. } | LazyHow::Map { scope, .. } => drop(scope.vars.take()),
        }
        let mut next = self.next.take();
        while let Some(node) = next {
            match Arc::try_unwrap(node) {
                Ok(mut node) => next = node.next.take(),
                Err(_) => break,
            }
        }
    }
}

/// A binding computed when an expression first reads it, then kept for every clone of the
/// scope: its value in the interpreter's form, or why it failed.
struct Lazy {
    cell: OnceLock<Result<Stored, EvalError>>,
    how: LazyHow,
}

/// A lazy binding's value.
enum Stored {
    /// A value JSON holds exactly, read in place like a document: the value at `path` below
    /// `root`. A variable that selects into a bound document ([`PathExpr`]) shares it and copies
    /// nothing; any other JSON result is its own `root`. No comprehension over it copies its
    /// elements again.
    Json {
        root: Arc<Value>,
        path: Arc<[String]>,
    },
    /// Any other value, in the interpreter's form.
    Val(Arc<dyn Val>),
}

impl Stored {
    fn json(value: Value) -> Stored {
        Stored::Json {
            root: Arc::new(value),
            path: Arc::from(Vec::new()),
        }
    }

    /// The JSON value, for [`Stored::Json`] (its path was found when it was stored).
    fn value(&self) -> Option<&Value> {
        match self {
            Stored::Json { root, path } => at_path(root, path),
            Stored::Val(_) => None,
        }
    }

    fn to_cel(&self) -> Result<Cel, String> {
        match self {
            Stored::Json { .. } => match self.value() {
                Some(v) => crate::view::to_cel(crate::view::view(v).as_ref()),
                None => Err("a stored variable lost its place".to_string()),
            },
            Stored::Val(v) => crate::view::to_cel(v.as_ref()),
        }
    }
}

enum LazyHow {
    /// Variable `name`, evaluated in `scope`: the scope it was declared in (the earlier
    /// variables, the `forEach` item, `object`, `params`, …).
    Var {
        name: Arc<str>,
        expr: Expr,
        scope: Scope,
        /// The shared value of a constant variable.
        constant: Option<Arc<ConstCell>>,
    },
    /// The `variables` map of the variables `names` (sorted), as `scope` binds them.
    Map { names: Arc<[String]>, scope: Scope },
}

impl Lazy {
    /// The value, computed on the first call. The lazy bindings it reads are computed first,
    /// from a stack of pending ones rather than by recursion, so a long chain of variables does
    /// not exhaust the thread's stack.
    fn force(&self) -> &Result<Stored, EvalError> {
        if let Some(done) = self.cell.get() {
            return done;
        }
        let mut pending: Vec<&Lazy> = vec![self];
        while let Some(&top) = pending.last() {
            if top.cell.get().is_some() {
                pending.pop();
                continue;
            }
            let before = pending.len();
            top.each_read(&mut |l| {
                if l.cell.get().is_none() {
                    pending.push(l);
                }
            });
            if pending.len() == before {
                let _ = top.cell.set(top.compute());
                pending.pop();
            }
        }
        self.cell.get_or_init(|| self.compute())
    }

    /// Calls `f` with each lazy binding this one reads directly.
    fn each_read<'s>(&'s self, f: &mut dyn FnMut(&'s Lazy)) {
        match &self.how {
            LazyHow::Var { expr, scope, .. } => {
                for r in expr.refs.iter().filter(|r| is_lazy_name(r)) {
                    if let Some(l) = scope.lazy(r) {
                        f(l);
                    }
                }
            }
            LazyHow::Map { names, scope } => {
                for n in names.iter() {
                    if let Some(l) = scope.lazy(&format!("{VARIABLE_PREFIX}{n}")) {
                        f(l);
                    }
                }
            }
        }
    }

    /// The value, or why not: [`EvalError::Unavailable`] as the expression met it, any other
    /// failure as [`EvalError::Upstream`] naming this variable.
    fn compute(&self) -> Result<Stored, EvalError> {
        if let LazyHow::Var {
            constant: Some(cell),
            ..
        } = &self.how
        {
            if let Some(Some((root, path, cost))) = cell.get()
                && crate::cost::charge_document(*cost)
            {
                return Ok(Stored::Json {
                    root: root.clone(),
                    path: path.clone(),
                });
            }
            let (stored, cost) = crate::cost::counted(|| self.compute_once());
            match &stored {
                Ok(Stored::Json { root, path }) => {
                    let _ = cell.set(Some((root.clone(), path.clone(), cost)));
                }
                Ok(Stored::Val(_)) => {
                    let _ = cell.set(None);
                }
                Err(_) => {}
            }
            return stored;
        }
        self.compute_once()
    }

    /// [`Lazy::compute`] without the shared value of a constant variable.
    fn compute_once(&self) -> Result<Stored, EvalError> {
        let value = match &self.how {
            LazyHow::Var {
                name, expr, scope, ..
            } => {
                if let Some(stored) = expr.path.as_ref().and_then(|p| p.walk(scope)) {
                    return Ok(stored);
                }
                let direct = expr.eval_direct(scope, |d, c| {
                    d.eval_stored(scope, c, |v| expr.place_of(v, scope))
                });
                let value = match direct {
                    Some(result) => result.map(Ok),
                    None => expr.eval_with(scope, |v| {
                        Ok(match expr.place_of(v, scope) {
                            Some((root, path)) => Ok(Stored::Json { root, path }),
                            None => match crate::view::to_json(v) {
                                Some(json) => Ok(Stored::json(json)),
                                None => Err(crate::view::to_cel(v)?),
                            },
                        })
                    }),
                }
                .map_err(|e| match e {
                    un @ EvalError::Unavailable(_) => un,
                    e => EvalError::Upstream(Arc::from(format!(
                        "variable {name:?} ({}) failed: {e}",
                        shown(expr.text())
                    ))),
                })?;
                match value {
                    Ok(stored) => return Ok(stored),
                    Err(cel) => cel,
                }
            }
            LazyHow::Map { names, scope } => {
                let mut map = HashMap::with_capacity(names.len());
                // In name order, so the failure reported does not depend on which was read first.
                for name in names.iter() {
                    if let Some(l) = scope.lazy(&format!("{VARIABLE_PREFIX}{name}")) {
                        let v = l.force().as_ref().map_err(Clone::clone)?;
                        map.insert(
                            name.clone(),
                            v.to_cel().map_err(|m| EvalError::Upstream(Arc::from(m)))?,
                        );
                    }
                }
                Cel::from(map)
            }
        };
        let kind = type_name(&value);
        match Box::<dyn Val>::try_from(value) {
            Ok(v) => Ok(Stored::Val(Arc::from(v))),
            Err(_) => Err(EvalError::Upstream(Arc::from(match &self.how {
                LazyHow::Var { name, .. } => {
                    format!("variables.{name} holds a {kind} value, which CEL cannot read")
                }
                LazyHow::Map { .. } => {
                    format!("variables holds a {kind} value, which CEL cannot read")
                }
            }))),
        }
    }
}

/// Whether `binding` can be a lazy one: a variable's (`__variables__<name>`) or `variables`.
fn is_lazy_name(binding: &str) -> bool {
    binding.starts_with(VARIABLE_PREFIX) || binding == "variables"
}

/// One binding of a [`Scope`].
#[derive(Clone)]
enum Bound {
    /// A JSON document, viewed in place.
    Json(Arc<Value>),
    /// The value at `path` below a shared JSON document ([`at_path`]), viewed in place.
    At {
        root: Arc<Value>,
        path: Arc<[String]>,
    },
    /// A CEL value in the interpreter's form.
    Val(Arc<dyn Val>),
    /// A JSON document made when an expression first reads it ([`Scope::bind_deferred`]).
    Deferred(Arc<Deferred>),
}

/// A JSON document bound by [`Scope::bind_deferred`]: made on the first read, then kept (or
/// why it could not be made).
struct Deferred {
    cell: OnceLock<Result<Arc<Value>, Arc<str>>>,
    make: DeferredFn,
}

/// What makes a [`Deferred`] document, or says why it cannot.
type DeferredFn = Box<dyn Fn() -> Result<Arc<Value>, Arc<str>> + Send + Sync>;

impl Deferred {
    fn get(&self) -> Option<&Arc<Value>> {
        self.cell.get_or_init(|| (self.make)()).as_ref().ok()
    }
}

impl std::fmt::Debug for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scope")
            .field("vars", &self.bound.keys())
            .field("failed", &self.failed.keys())
            .finish()
    }
}

impl VariableResolver for Scope {
    fn resolve<'b>(&'b self, variable: &str) -> Option<CowVal<'b, 'b>> {
        // The interpreter asks for a qualified name (`object.spec.x`) whole first, then for
        // each shorter prefix down to the binding (`object`), and selects the rest field by
        // field. A binding that holds a JSON document answers the whole name at once with the
        // node the fields select, which is the view selecting them one by one gives. A field
        // that is missing, or selected on anything but a mapping, is left to the interpreter,
        // whose error names it.
        // (Names are a few bytes: a byte loop finds the dots faster than a substring search.)
        if let Some(dot) = variable.bytes().position(|b| b == b'.') {
            let (doc, path) = self.json_place(&variable[..dot], true)?;
            let mut node = at_path(doc, path)?;
            let mut rest = &variable[dot + 1..];
            loop {
                let end = rest.bytes().position(|b| b == b'.').unwrap_or(rest.len());
                node = crate::view::json_field(node.as_object()?, &rest[..end])?;
                if end == rest.len() {
                    return Some(CowVal::Owned(crate::view::view(node)));
                }
                rest = &rest[end + 1..];
            }
        }
        if is_lazy_name(variable)
            && let Some(l) = self.lazy(variable)
        {
            // Forced before the expression ran (see `Scope::upstream_failure`).
            return Some(match l.force().as_ref().ok()? {
                s @ Stored::Json { .. } => CowVal::Owned(crate::view::view(s.value()?)),
                Stored::Val(v) => CowVal::Borrowed(v.as_ref()),
            });
        }
        Some(match self.bound.get(variable)? {
            Bound::Json(v) => CowVal::Owned(crate::view::view(v)),
            Bound::At { root, path } => CowVal::Owned(crate::view::view(at_path(root, path)?)),
            Bound::Val(v) => CowVal::Borrowed(v.as_ref()),
            // Not made: the name is left unresolved, so the expression fails (closed).
            Bound::Deferred(d) => CowVal::Owned(crate::view::view(d.get()?)),
        })
    }
}

impl Scope {
    /// An empty scope.
    pub fn new() -> Scope {
        Scope::default()
    }

    /// Binds `name` to a JSON value (a copy of it; [`Scope::bind_shared`] shares one).
    pub fn bind(&mut self, name: &str, value: &Value) {
        self.bind_shared(name, Arc::new(value.clone()));
    }

    /// Binds `name` to a shared JSON value, read in place.
    pub fn bind_shared(&mut self, name: &str, value: Arc<Value>) {
        self.unfail(name);
        Arc::make_mut(&mut self.bound).insert(name.to_string(), Bound::Json(value));
    }

    /// Binds `name` to the value at `path` below the shared JSON document `root` (mapping keys,
    /// and decimal indexes into lists), read in place.
    pub(crate) fn bind_at(&mut self, name: &str, root: Arc<Value>, path: Arc<[String]>) {
        self.unfail(name);
        Arc::make_mut(&mut self.bound).insert(name.to_string(), Bound::At { root, path });
    }

    /// Binds `name` to the JSON document `make` returns, read in place, made when an
    /// expression first reads the name (a scope cloned after that shares it). `make` failing
    /// fails every expression that reads the name, with its reason
    /// ([`EvalError::Unavailable`]). An expression that does not reach it (the other branch of
    /// a conditional) never makes it.
    pub(crate) fn bind_deferred(
        &mut self,
        name: &str,
        make: impl Fn() -> Result<Arc<Value>, Arc<str>> + Send + Sync + 'static,
    ) {
        self.unfail(name);
        let deferred = Deferred {
            cell: OnceLock::new(),
            make: Box::new(make),
        };
        Arc::make_mut(&mut self.bound)
            .insert(name.to_string(), Bound::Deferred(Arc::new(deferred)));
    }

    /// Binds `name` to a CEL value. A value the interpreter cannot hold (a function value)
    /// marks the binding failed: expressions that read it fail with the reason.
    pub fn bind_cel(&mut self, name: &str, value: Cel) {
        let kind = type_name(&value);
        match Box::<dyn Val>::try_from(value) {
            Ok(v) => {
                self.unfail(name);
                Arc::make_mut(&mut self.bound).insert(name.to_string(), Bound::Val(Arc::from(v)));
            }
            Err(_) => {
                self.unbind(name);
                Arc::make_mut(&mut self.failed).insert(
                    name.to_string(),
                    EvalError::Upstream(Arc::from(format!(
                        "{name} holds a {kind} value, which CEL cannot read"
                    ))),
                );
            }
        }
    }

    /// Binds `name` to a CEL value for the expressions evaluated in this scope and its clones
    /// (the same as [`Scope::bind_cel`]; kept for the callers that bind per item).
    pub fn bind_local(&mut self, name: &str, value: Cel) {
        self.bind_cel(name, value);
    }

    /// Binds `variables.<name>` to `expr` ([`Scope::bind_variables`] of one variable, with no
    /// `variables` map).
    #[cfg(test)]
    pub(crate) fn bind_variable(&mut self, name: &str, expr: &Expr) {
        let how = LazyHow::Var {
            name: Arc::from(name),
            expr: expr.clone(),
            scope: self.clone(),
            constant: None,
        };
        self.push_lazy(Arc::from(format!("{VARIABLE_PREFIX}{name}")), how);
    }

    /// Binds each of `b`'s variables, in order, then the `variables` map of every name `b`
    /// makes visible. A variable is evaluated in this scope as it is when the variable is bound
    /// (the ones before it included) when an expression first reads it (once for this scope
    /// and all its clones). An expression that reads a variable that cannot be evaluated fails
    /// with `variable "name" (expression) failed: error`, the error of a failed variable it
    /// reads being that one's message.
    pub(crate) fn bind_variables(&mut self, b: &VarBindings) {
        for v in &b.vars {
            let how = LazyHow::Var {
                name: v.name.clone(),
                expr: v.expr.clone(),
                scope: self.clone(),
                constant: v.constant.clone(),
            };
            self.push_lazy(v.binding.clone(), how);
        }
        let how = LazyHow::Map {
            names: b.names.clone(),
            scope: self.clone(),
        };
        self.push_lazy(b.map.clone(), how);
    }

    fn push_lazy(&mut self, binding: Arc<str>, how: LazyHow) {
        self.vars = Some(Arc::new(VarNode {
            binding,
            lazy: Lazy {
                cell: OnceLock::new(),
                how,
            },
            next: self.vars.take(),
        }));
    }

    /// Where binding `name` is when it is a JSON document or a place in one (a bound document,
    /// a `forEach` item's place, a variable stored as JSON): the shared root and the path below
    /// it. A variable not yet evaluated is evaluated first when `force`, else passed over.
    fn json_place(&self, name: &str, force: bool) -> Option<(&Arc<Value>, &[String])> {
        match self.bound.get(name) {
            Some(Bound::Json(doc)) => Some((doc, &[])),
            Some(Bound::At { root, path }) => Some((root, path)),
            Some(Bound::Val(_)) => None,
            Some(Bound::Deferred(d)) => {
                let doc = if force {
                    d.get()
                } else {
                    d.cell.get()?.as_ref().ok()
                };
                doc.map(|doc| (doc, &[] as &[String]))
            }
            None => {
                let lazy = self.lazy(name)?;
                let stored = if force {
                    lazy.force()
                } else {
                    lazy.cell.get()?
                };
                match stored {
                    Ok(Stored::Json { root, path }) => Some((root, path)),
                    _ => None,
                }
            }
        }
    }

    /// Why a deferred binding `e` reads could not be made, when one could not.
    fn deferred_failure(&self, e: &Expr) -> Option<EvalError> {
        e.refs
            .iter()
            .find_map(|r| match self.bound.get(r.as_str()) {
                Some(Bound::Deferred(d)) => match d.cell.get() {
                    Some(Err(reason)) => Some(EvalError::Unavailable(reason.clone())),
                    _ => None,
                },
                _ => None,
            })
    }

    /// The newest lazy binding named `binding`.
    fn lazy(&self, binding: &str) -> Option<&Lazy> {
        let mut node = self.vars.as_deref();
        while let Some(n) = node {
            if &*n.binding == binding {
                return Some(&n.lazy);
            }
            node = n.next.as_deref();
        }
        None
    }

    /// Forgets that binding `name` failed (copying the shared map only when it did).
    fn unfail(&mut self, name: &str) {
        if self.failed.contains_key(name) {
            Arc::make_mut(&mut self.failed).remove(name);
        }
    }

    /// Removes binding `name` (copying the shared map only when it is bound).
    fn unbind(&mut self, name: &str) {
        if self.bound.contains_key(name) {
            Arc::make_mut(&mut self.bound).remove(name);
        }
    }

    /// Marks fragment `name` as failed: expressions and templates that read it fail with
    /// `message`.
    pub(crate) fn fail_fragment(&mut self, name: &str, message: Arc<str>) {
        Arc::make_mut(&mut self.failed).insert(
            format!("{FRAGMENT_FAILURE_PREFIX}{name}"),
            EvalError::Upstream(message),
        );
    }

    /// Why fragment `name` could not be rendered, if it could not.
    fn fragment_failure(&self, name: &str) -> Option<&EvalError> {
        if self.failed.is_empty() {
            return None;
        }
        self.failed.get(&format!("{FRAGMENT_FAILURE_PREFIX}{name}"))
    }

    /// The failure of the first failed variable or fragment `e` reads, if any (identifiers in
    /// sorted order, so the message is deterministic).
    fn upstream_failure(&self, e: &Expr) -> Option<EvalError> {
        if self.vars.is_none() && self.failed.is_empty() {
            return None;
        }
        let first_with = |prefix: &str| {
            self.failed
                .iter()
                .find(|(k, _)| k.starts_with(prefix))
                .map(|(_, m)| m)
        };
        // In the sorted order of `refs`, so the failure named is always the same one.
        for r in e.refs.iter() {
            // A variable it reads is evaluated now, in its own cost budget.
            if is_lazy_name(r)
                && let Some(l) = self.lazy(r)
            {
                match l.force() {
                    Err(m) => return Some(m.clone()),
                    Ok(_) => continue,
                }
            }
            let failure = match r.as_str() {
                "fragments" => match e.fragment_reads.as_ref() {
                    FieldReads::All => first_with(FRAGMENT_FAILURE_PREFIX),
                    FieldReads::Fields(names) => {
                        names.iter().find_map(|n| self.fragment_failure(n))
                    }
                },
                name => self.failed.get(name),
            };
            if failure.is_some() {
                return failure.cloned();
            }
        }
        None
    }
}

/// A function over the evaluated operands (`this` first, for a method call), which it reads
/// in place.
type RawFn = Box<
    dyn for<'c, 'a> Fn(&mut FunctionContext<'c, 'a>) -> Result<CowVal<'c, 'a>, ExecutionError>
        + Send
        + Sync,
>;

/// Adds `f` as `name`, callable as a function and as a method. Our names are declared by no
/// library overload, so the root context accepts them.
fn add_raw(ctx: &mut cel::Context<'static, 'static>, name: &str, f: RawFn) {
    let _ = ctx.add_function(name, f);
}

/// The operands of a call: the receiver of a method call, then the arguments.
fn operands<'x, 'a>(ftx: &'x FunctionContext<'_, 'a>) -> Vec<&'x (dyn Val + 'a)> {
    ftx.this
        .iter()
        .chain(ftx.args.iter())
        .map(|v| v.as_ref())
        .collect()
}

/// The string operand `i`, or the error of a call that does not take what it was given.
fn string_operand<'x, 'a>(
    ftx: &FunctionContext<'_, '_>,
    ops: &[&'x (dyn Val + 'a)],
    i: usize,
    arity: usize,
) -> Result<&'x str, ExecutionError> {
    if ops.len() != arity {
        return Err(ExecutionError::invalid_argument_count(arity, ops.len()));
    }
    match ops.get(i).and_then(|v| v.downcast_ref::<CelString>()) {
        Some(s) => Ok(s.inner()),
        None => Err(ExecutionError::no_such_overload(
            ftx.name,
            ops.iter()
                .map(|v| crate::view::val_type_name(*v).to_string())
                .collect(),
        )),
    }
}

/// The `types` family of our CEL extensions.
///
/// - `typeName(x)` → `'list' | 'map' | 'string' | 'int' | 'uint' | 'double' | 'bool' | 'null' |
///   'bytes'`: `typeName(object.spec.replicatedJobs) == 'list'`.
///
/// - `fieldTypeErrors(holder, fields, path)` → the fields of `holder` whose types the table
///   `fields` does not allow, as `{at, f, shape, got}` maps (see `field_types`).
///
/// And one string function:
///
/// - `goQuote(s)` → `s` quoted as Go's `%q` does (the original's messages quote names and
///   values that way): `goQuote('a\x01')` is `"a\x01"` with the control character escaped.
fn register_types(ctx: &mut cel::Context<'static, 'static>) {
    add_raw(
        ctx,
        "typeName",
        Box::new(|ftx| {
            let ops = operands(ftx);
            let [v] = ops.as_slice() else {
                return Err(ExecutionError::invalid_argument_count(1, ops.len()));
            };
            Ok(CowVal::owned(CelString::from(
                crate::view::val_type_name(*v).to_string(),
            )))
        }),
    );
    add_raw(
        ctx,
        field_types::NAME,
        Box::new(|ftx| {
            let ops = operands(ftx);
            let [holder, fields, path] = ops.as_slice() else {
                return Err(ExecutionError::invalid_argument_count(3, ops.len()));
            };
            let Some(path) = path.downcast_ref::<CelString>() else {
                return Err(ExecutionError::no_such_overload(
                    ftx.name,
                    ops.iter()
                        .map(|v| crate::view::val_type_name(*v).to_string())
                        .collect(),
                ));
            };
            field_types::field_type_errors(*holder, *fields, path.inner()).map(CowVal::Owned)
        }),
    );
    add_raw(
        ctx,
        "goQuote",
        Box::new(|ftx| {
            let ops = operands(ftx);
            let s = string_operand(ftx, &ops, 0, 1)?;
            Ok(CowVal::owned(CelString::from(crate::quote::go_quote(s))))
        }),
    );
}

/// The interpreter's `Val` for an opaque value of ours: a `Copy` newtype that only our
/// functions take, of CEL type `$ty`, equal when its inner values are.
macro_rules! opaque_val {
    ($name:ident, $ty:ident) => {
        impl Val for $name {
            fn get_type(&self) -> &Type {
                &$ty
            }

            fn cel_type() -> &'static Type {
                &$ty
            }

            fn equals(&self, other: &dyn Val) -> bool {
                other.downcast_ref::<$name>() == Some(self)
            }

            fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
                Box::new($name(self.0))
            }

            fn as_any(&self) -> Option<&dyn std::any::Any> {
                Some(self)
            }
        }

        impl StaticVal for $name {}
    };
}

/// A named format value (`format.labelValue()`), which only `validate` takes.
#[derive(Debug, PartialEq, Eq)]
struct FormatValue(crate::format::Format);

/// The CEL type of a [`FormatValue`].
static FORMAT_TYPE: Type = Type::new_unspecified_type("kubernetes.NamedFormat");

opaque_val!(FormatValue, FORMAT_TYPE);

/// `format.qualifiedName()`, `format.labelValue()` and `<format>.validate(s)` (see
/// [`crate::format`]): `validate` gives `optional.none()` for a valid string, else the optional
/// list of the API server's messages.
fn register_formats(ctx: &mut cel::Context<'static, 'static>) {
    use crate::format::Format;
    for (name, format) in [
        ("format.qualifiedName", Format::QualifiedName),
        ("format.labelValue", Format::LabelValue),
        ("format.duration", Format::Duration),
    ] {
        add_raw(
            ctx,
            name,
            Box::new(move |ftx| {
                let n = operands(ftx).len();
                if n != 0 {
                    return Err(ExecutionError::invalid_argument_count(0, n));
                }
                Ok(CowVal::owned(FormatValue(format)))
            }),
        );
    }
    add_raw(
        ctx,
        "validate",
        Box::new(|ftx| {
            let ops = operands(ftx);
            let Some(format) = ops.first().and_then(|v| v.downcast_ref::<FormatValue>()) else {
                return Err(
                    ftx.error("validate is called on a named format, such as format.labelValue()")
                );
            };
            let s = string_operand(ftx, &ops, 1, 2)?;
            let errs = format.0.validate(s);
            if errs.is_empty() {
                return Ok(CowVal::owned(CelOptional::none()));
            }
            let list: Vec<Box<dyn Val>> = errs
                .into_iter()
                .map(|e| Box::new(CelString::from(e)) as Box<dyn Val>)
                .collect();
            Ok(CowVal::owned(CelOptional::of(Box::new(
                cel::common::types::CelList::from(list),
            ))))
        }),
    );
}

/// A Kubernetes quantity (`quantity('8000m')`), which only the quantity methods take.
#[derive(Debug, PartialEq, Eq)]
struct QuantityValue(crate::quantity::Quantity);

/// The CEL type of a [`QuantityValue`].
static QUANTITY_TYPE: Type = Type::new_unspecified_type("kubernetes.Quantity");

opaque_val!(QuantityValue, QUANTITY_TYPE);

/// The quantity operand `i` of a call of `arity` operands.
fn quantity_operand(
    ftx: &FunctionContext<'_, '_>,
    ops: &[&(dyn Val + '_)],
    i: usize,
    arity: usize,
) -> Result<crate::quantity::Quantity, ExecutionError> {
    if ops.len() != arity {
        return Err(ExecutionError::invalid_argument_count(arity, ops.len()));
    }
    match ops.get(i).and_then(|v| v.downcast_ref::<QuantityValue>()) {
        Some(q) => Ok(q.0),
        None => Err(ftx.error(format!(
            "{} is called on a quantity, such as quantity('8'), with quantities as its arguments",
            ftx.name
        ))),
    }
}

/// The Kubernetes quantity library, compared by value (see [`crate::quantity`]):
///
/// - `quantity(s)` → a quantity, or an error naming `s` when it is not one;
/// - `q.isEqualTo(r)`, `q.isLessThan(r)`, `q.isGreaterThan(r)` → bool;
/// - `q.compareTo(r)` → `-1`, `0` or `1`;
/// - `q.isInteger()` → whether it is a whole number that fits an int; `q.asInteger()` → that
///   number, or an error.
fn register_quantities(ctx: &mut cel::Context<'static, 'static>) {
    use cel::common::types::CelInt;
    add_raw(
        ctx,
        "quantity",
        Box::new(|ftx| {
            let ops = operands(ftx);
            let s = string_operand(ftx, &ops, 0, 1)?;
            let q = crate::quantity::Quantity::parse(s).map_err(|m| ftx.error(m))?;
            Ok(CowVal::owned(QuantityValue(q)))
        }),
    );
    type Compare = fn(std::cmp::Ordering) -> bool;
    let comparisons: [(&str, Compare); 3] = [
        ("isEqualTo", std::cmp::Ordering::is_eq),
        ("isLessThan", std::cmp::Ordering::is_lt),
        ("isGreaterThan", std::cmp::Ordering::is_gt),
    ];
    for (name, test) in comparisons {
        add_raw(
            ctx,
            name,
            Box::new(move |ftx| {
                let ops = operands(ftx);
                let a = quantity_operand(ftx, &ops, 0, 2)?;
                let b = quantity_operand(ftx, &ops, 1, 2)?;
                Ok(CowVal::owned(CelBool::from(test(a.cmp(&b)))))
            }),
        );
    }
    add_raw(
        ctx,
        "compareTo",
        Box::new(|ftx| {
            let ops = operands(ftx);
            let a = quantity_operand(ftx, &ops, 0, 2)?;
            let b = quantity_operand(ftx, &ops, 1, 2)?;
            Ok(CowVal::owned(CelInt::from(a.compare(b))))
        }),
    );
    add_raw(
        ctx,
        "isInteger",
        Box::new(|ftx| {
            let ops = operands(ftx);
            let q = quantity_operand(ftx, &ops, 0, 1)?;
            Ok(CowVal::owned(CelBool::from(q.as_integer().is_some())))
        }),
    );
    add_raw(
        ctx,
        "asInteger",
        Box::new(|ftx| {
            let ops = operands(ftx);
            let q = quantity_operand(ftx, &ops, 0, 1)?;
            match q.as_integer() {
                Some(n) => Ok(CowVal::owned(CelInt::from(n))),
                None => Err(ftx.error(
                    "asInteger: the quantity is not a whole number that fits an int (test isInteger() first)",
                )),
            }
        }),
    );
}

/// The functions the cost rewrite calls (see [`crate::cost`]); each is true while the budgets
/// last. The one every comprehension's loop condition calls first with the comprehension's
/// accumulator charges one unit, plus one per element the accumulator holds (a `map`'s or
/// `filter`'s list so far); the one a whole-list walk inside a loop calls first with that list
/// charges one unit per element of a list (a map's lookups cost nothing); the one a
/// whole-string walk inside a loop calls first with that string charges one unit per started
/// 64 bytes of it (any other value, nothing: `size` of a list is not a walk).
fn register_cost(ctx: &mut cel::Context<'static, 'static>) {
    register_charge(ctx, crate::cost::COST_FUNCTION, true, 1);
    register_charge(ctx, crate::cost::SCAN_FUNCTION, false, 0);
    add_raw(
        ctx,
        crate::cost::TEXT_SCAN_FUNCTION,
        Box::new(|ftx| {
            let bytes = operands(ftx)
                .first()
                .and_then(|v| v.downcast_ref::<CelString>())
                .map_or(0, |s| s.inner().len());
            crate::cost::charge_text(bytes)
                .map(|()| CowVal::owned(CelBool::from(true)))
                .map_err(|budget| ftx.error(budget.message()))
        }),
    );
}

/// Registers `name`: charges `base` units plus one per element of its first operand when that
/// is a list (or, with `maps`, a map).
fn register_charge(ctx: &mut cel::Context<'static, 'static>, name: &str, maps: bool, base: u64) {
    add_raw(
        ctx,
        name,
        Box::new(move |ftx| {
            let held = operands(ftx)
                .first()
                .filter(|v| match v.get_type().kind() {
                    Kind::List => true,
                    Kind::Map => maps,
                    _ => false,
                })
                .and_then(|v| v.as_sizer())
                .map_or(0, |s| *s.size().inner());
            let units = u64::try_from(held).unwrap_or(u64::MAX).saturating_add(base);
            crate::cost::charge(units)
                .map(|()| CowVal::owned(CelBool::from(true)))
                .map_err(|budget| ftx.error(budget.message()))
        }),
    );
}

/// Charges a regex scan of `text` (see [`crate::cost`]).
fn charge_regex(name: &str, text: &str) -> Result<(), ExecutionError> {
    crate::cost::charge_regex(text.len())
        .map_err(|budget| ExecutionError::function_error(name, budget.message()))
}

/// Regular expressions compiled so far, by pattern, shared by every thread: rules match the
/// same few patterns against every label and name, and compiling a pattern costs far more than
/// matching it. Bounded: patterns computed from input must not grow it without limit.
static REGEXES: LazyLock<Mutex<HashMap<String, Arc<regex::Regex>>>> =
    LazyLock::new(Default::default);

/// How many patterns [`REGEXES`] keeps before it starts over.
const REGEX_CACHE_SIZE: usize = 512;

/// `pattern`, read as Go reads it ([`crate::go_regex`]: CEL's regex functions are Go's RE2),
/// translated and compiled once.
fn cached_regex(pattern: &str) -> Result<Arc<regex::Regex>, crate::go_regex::GoRegexError> {
    if let Some(re) = REGEXES.lock().ok().and_then(|c| c.get(pattern).cloned()) {
        return Ok(re);
    }
    let re = Arc::new(crate::go_regex::compile(pattern)?);
    if let Ok(mut c) = REGEXES.lock() {
        if c.len() >= REGEX_CACHE_SIZE {
            c.clear();
        }
        c.insert(pattern.to_string(), re.clone());
    }
    Ok(re)
}

/// `matches` (as the standard library defines it), `find` and `findAll` (as the API server
/// does), over [`cached_regex`]: the library's `matches` compiles its pattern on every call (its
/// `regex` feature is off, so ours is the only one). Each call charges its input to the cost
/// meter first.
fn register_cached_regex(ctx: &mut cel::Context<'static, 'static>) {
    add_raw(
        ctx,
        "matches",
        Box::new(|ftx| {
            let ops = operands(ftx);
            let this = string_operand(ftx, &ops, 0, 2)?;
            let pattern = string_operand(ftx, &ops, 1, 2)?;
            charge_regex("matches", this)?;
            match cached_regex(pattern) {
                Ok(re) => Ok(CowVal::owned(CelBool::from(re.is_match(this)))),
                Err(err) => Err(ftx.error(format!("'{pattern}' not a valid regex:\n{err}"))),
            }
        }),
    );
    // `s.find(re)`: the first match, or `''`.
    add_raw(
        ctx,
        "find",
        Box::new(|ftx| {
            let ops = operands(ftx);
            let this = string_operand(ftx, &ops, 0, 2)?;
            let pattern = string_operand(ftx, &ops, 1, 2)?;
            charge_regex("find", this)?;
            let re = cached_regex(pattern).map_err(|e| ftx.error(format!("invalid regex: {e}")))?;
            let found = re.find(this).map(|m| m.as_str()).unwrap_or_default();
            Ok(CowVal::owned(CelString::from(found.to_string())))
        }),
    );
    // `s.findAll(re)`, `s.findAll(re, n)`: every match, or the first `n` (all when `n < 0`).
    add_raw(
        ctx,
        "findAll",
        Box::new(|ftx| {
            let ops = operands(ftx);
            let arity = if ops.len() == 3 { 3 } else { 2 };
            let this = string_operand(ftx, &ops, 0, arity)?;
            let pattern = string_operand(ftx, &ops, 1, arity)?;
            let limit = match ops.get(2) {
                None => usize::MAX,
                Some(n) => match n.downcast_ref::<cel::common::types::CelInt>() {
                    Some(n) => usize::try_from(*n.inner()).unwrap_or(usize::MAX),
                    None => {
                        return Err(ExecutionError::no_such_overload(
                            "findAll",
                            ops.iter()
                                .map(|v| crate::view::val_type_name(*v).to_string())
                                .collect(),
                        ));
                    }
                },
            };
            charge_regex("findAll", this)?;
            let re = cached_regex(pattern).map_err(|e| ftx.error(format!("invalid regex: {e}")))?;
            let found: Vec<Box<dyn Val>> = re
                .find_iter(this)
                .take(limit)
                .map(|m| Box::new(CelString::from(m.as_str().to_string())) as Box<dyn Val>)
                .collect();
            Ok(CowVal::owned(cel::common::types::CelList::from(found)))
        }),
    );
}

/// An evaluation error in a rule author's words: values written as CEL literals with their
/// type (`2 (int)`, `"a" (string)`), never the interpreter's debug form (`Int(2)`,
/// `String("a")`).
#[allow(deprecated)] // the interpreter still raises some of the deprecated variants
fn execution_error_text(e: &ExecutionError) -> String {
    use cel::ExecutionError as E;
    let v = |x: &Cel| format!("{} ({})", cel_literal(x), type_name(x));
    let op = |name: &str| -> String {
        match name {
            "add" => "+",
            "sub" | "minus" => "-",
            "mul" => "*",
            "div" => "/",
            "rem" => "%",
            "not" => "!",
            other => other,
        }
        .to_string()
    };
    match e {
        E::UnsupportedTargetType { target } => format!("invalid argument type: {}", v(target)),
        E::NotSupportedAsMethod { method, target } => {
            format!("method '{method}' is not supported on {}", v(target))
        }
        E::UnsupportedKeyType(k) => format!("{} cannot be a map key", v(k)),
        E::ValuesNotComparable(a, b) => format!("{} cannot be compared to {}", v(a), v(b)),
        E::UnsupportedUnaryOperator(name, a) => {
            format!("operator '{}' does not take {}", op(name), v(a))
        }
        E::UnsupportedBinaryOperator(name, a, b) => {
            format!(
                "operator '{}' does not take {} and {}",
                op(name),
                v(a),
                v(b)
            )
        }
        E::UnsupportedMapIndex(k) => format!("{} cannot index a map", v(k)),
        E::UnsupportedListIndex(k) => format!("{} cannot index a list", v(k)),
        E::UnsupportedIndex(k, target) => format!("{} cannot index {}", v(k), v(target)),
        E::DivisionByZero(a) => format!("division by zero ({} / 0)", cel_literal(a)),
        E::RemainderByZero(a) => format!("remainder by zero ({} % 0)", cel_literal(a)),
        E::Overflow(name, a, b) => format!(
            "integer overflow: {} {} {} is out of range",
            cel_literal(a),
            op(name),
            cel_literal(b)
        ),
        E::IndexOutOfBounds(i) => format!("index {} is out of bounds", cel_literal(i)),
        E::NoSuchOverload(o) => {
            let types = o.argument_types();
            let f = o.function();
            if let ("_._" | ".", [target, ..]) = (f, types) {
                format!("cannot select a field of a {target}")
            } else if f.starts_with(['_', '@']) || f.ends_with('_') {
                let symbol = match f {
                    "_[_]" | "_[?_]" => "[]".to_string(),
                    operators::IN => "in".to_string(),
                    other => other.trim_matches('_').to_string(),
                };
                format!("operator '{symbol}' does not take {}", types.join(" and "))
            } else if let (true, [this, args @ ..]) = (o.is_member_function(), types) {
                format!(
                    "method '{f}' does not take ({}) on a {this}",
                    args.join(", ")
                )
            } else {
                format!("function '{f}' does not take ({})", types.join(", "))
            }
        }
        E::UnexpectedType { got, want } => format!("expected {want}, got {got}"),
        E::DuplicateKey(k) => format!("map literal repeats the key {}", cel_literal(k)),
        E::InternalError(m) => m.clone(),
        other => other.to_string(),
    }
}

/// True for the evaluation errors that the types of the operands decide, whatever their values.
#[allow(deprecated)] // the interpreter still raises some of the deprecated variants
fn is_type_error(e: &ExecutionError) -> bool {
    use cel::ExecutionError as E;
    matches!(
        e,
        E::InvalidArgumentCount { .. }
            | E::UnsupportedTargetType { .. }
            | E::NotSupportedAsMethod { .. }
            | E::UnsupportedKeyType(_)
            | E::UnexpectedType { .. }
            | E::NoSuchOverload(_)
            | E::UndeclaredReference(_)
            | E::MissingArgumentOrTarget
            | E::ValuesNotComparable(..)
            | E::UnsupportedUnaryOperator(..)
            | E::UnsupportedBinaryOperator(..)
            | E::UnsupportedMapIndex(_)
            | E::UnsupportedListIndex(_)
            | E::UnsupportedIndex(..)
    )
}

/// `value` as a CEL literal, for messages; lists and maps longer than a few entries, and long
/// strings, are cut with `…`.
fn cel_literal(value: &Cel) -> String {
    const ENTRIES: usize = 4;
    const CHARS: usize = 60;
    match value {
        Cel::Int(i) => i.to_string(),
        Cel::UInt(u) => format!("{u}u"),
        Cel::Float(f) if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e15 => format!("{f:.1}"),
        Cel::Float(f) => f.to_string(),
        Cel::Bool(b) => b.to_string(),
        Cel::Null => "null".to_string(),
        Cel::String(s) if s.chars().count() > CHARS => {
            let cut: String = s.chars().take(CHARS).collect();
            format!("{}…", crate::quote::go_quote(&cut))
        }
        Cel::String(s) => crate::quote::go_quote(s),
        Cel::Bytes(_) => "b\"…\"".to_string(),
        Cel::List(items) => {
            let mut parts: Vec<String> = items.iter().take(ENTRIES).map(cel_literal).collect();
            if items.len() > ENTRIES {
                parts.push("…".to_string());
            }
            format!("[{}]", parts.join(", "))
        }
        Cel::Map(m) => {
            let mut parts: Vec<String> = m
                .map
                .iter()
                .take(ENTRIES)
                .map(|(k, x)| format!("{}: {}", cel_literal(&Cel::from(k.clone())), cel_literal(x)))
                .collect();
            if m.map.len() > ENTRIES {
                parts.push("…".to_string());
            }
            format!("{{{}}}", parts.join(", "))
        }
        other => type_name(other).to_string(),
    }
}

/// A short type name for messages.
pub fn type_name(v: &Cel) -> &'static str {
    match v {
        Cel::List(_) => "list",
        Cel::Map(_) => "map",
        Cel::Function(..) => "function",
        Cel::Int(_) => "int",
        Cel::UInt(_) => "uint",
        Cel::Float(_) => "double",
        Cel::String(_) => "string",
        Cel::Bytes(_) => "bytes",
        Cel::Bool(_) => "bool",
        Cel::Null => "null",
        _ => "opaque",
    }
}

/// Converts JSON to a CEL value. Integers become `int` (as the API server's CEL does for
/// integer JSON fields), other numbers `double`.
pub fn json_to_cel(v: &Value) -> Cel {
    match v {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Cel::Int(i),
            None => match n.as_u64() {
                Some(u) => Cel::UInt(u),
                None => Cel::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
        },
        Value::String(s) => Cel::String(Arc::new(s.clone())),
        Value::Array(a) => Cel::List(Arc::new(a.iter().map(json_to_cel).collect())),
        Value::Object(o) => {
            let map: HashMap<Key, Cel> = o
                .iter()
                .map(|(k, v)| (Key::String(Arc::new(k.clone())), json_to_cel(v)))
                .collect();
            Cel::Map(CelMap { map: Arc::new(map) })
        }
    }
}

/// Converts a CEL value to JSON. Map keys are sorted so the output is deterministic.
///
/// # Errors
/// [`ConversionError`] for values JSON cannot represent.
pub fn cel_to_json(v: &Cel) -> Result<Value, ConversionError> {
    cel_json(v).map_err(|message| ConversionError { message })
}

fn cel_json(v: &Cel) -> Result<Value, String> {
    Ok(match v {
        Cel::Null => Value::Null,
        Cel::Bool(b) => Value::Bool(*b),
        Cel::Int(i) => Value::from(*i),
        Cel::UInt(u) => Value::from(*u),
        Cel::Float(f) => serde_json::Number::from_f64(*f)
            .map(Value::Number)
            .ok_or_else(|| format!("non-finite number {f}"))?,
        Cel::String(s) => Value::String(s.to_string()),
        Cel::List(l) => Value::Array(l.iter().map(cel_json).collect::<Result<_, _>>()?),
        Cel::Map(m) => {
            let mut entries: Vec<(String, Value)> = m
                .map
                .iter()
                .map(|(k, v)| Ok((key_string(k), cel_json(v)?)))
                .collect::<Result<_, String>>()?;
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(entries.into_iter().collect())
        }
        other => {
            return Err(format!(
                "a {} value cannot be written to a manifest",
                type_name(other)
            ));
        }
    })
}

fn key_string(k: &Key) -> String {
    match k {
        Key::String(s) => s.to_string(),
        Key::Int(i) => i.to_string(),
        Key::Uint(u) => u.to_string(),
        Key::Bool(b) => b.to_string(),
    }
}

/// Converts a CEL scalar to the text used in interpolation.
fn cel_to_text(v: &Cel) -> Result<String, String> {
    Ok(match v {
        Cel::String(s) => s.to_string(),
        Cel::Int(i) => i.to_string(),
        Cel::UInt(u) => u.to_string(),
        Cel::Float(f) => f.to_string(),
        Cel::Bool(b) => b.to_string(),
        Cel::Null => "null".to_string(),
        other => serde_json::to_string(&cel_json(other)?).map_err(|e| e.to_string())?,
    })
}

/// A YAML value with embedded CEL (see the module docs), compiled.
#[derive(Debug, Clone)]
pub enum Template {
    /// Plain data.
    Literal(Value),
    /// `${{ expr }}`: the value of the expression.
    Expr(Expr),
    /// Text with `${{ … }}` parts.
    Interp(Vec<Part>),
    /// A list; items may splice.
    List(Vec<Item>),
    /// A mapping; keys may be templated.
    Map(Vec<(Template, Template)>),
    /// `{$fragment: name}`.
    Fragment(String),
    /// `{$if, $then, $else}`.
    If(Expr, Box<Template>, Option<Box<Template>>),
}

/// How the templates of a table read `params` and the fragments ([`Template::param_uses`]).
#[derive(Debug)]
pub(crate) struct ParamUses {
    /// Params read as exactly `params.x` where the string reaches the output unchanged.
    pub(crate) bare: BTreeSet<String>,
    /// Params read any other way.
    pub(crate) other: FieldReads,
    /// Fragments that CEL expressions read (`fragments.x`).
    pub(crate) fragments_cel: FieldReads,
    /// Fragments inserted by `{$fragment: name}`.
    pub(crate) fragments_embedded: BTreeSet<String>,
}

impl Default for ParamUses {
    fn default() -> ParamUses {
        ParamUses {
            bare: BTreeSet::new(),
            other: FieldReads::Fields(BTreeSet::new()),
            fragments_cel: FieldReads::Fields(BTreeSet::new()),
            fragments_embedded: BTreeSet::new(),
        }
    }
}

/// A piece of an interpolated string.
#[derive(Debug, Clone)]
pub enum Part {
    /// Literal text.
    Text(String),
    /// An embedded expression.
    Expr(Expr),
}

/// A list item of a [`Template::List`].
#[derive(Debug, Clone)]
pub enum Item {
    /// One element.
    One(Template),
    /// Elements spliced from a list-valued template.
    Splice(Template),
}

/// Rendering outcome of one node: a value, or nothing (a false `$if` without `$else`).
type Rendered = Option<Value>;

/// Named fragments available to `{$fragment: name}` and to CEL as `fragments.<name>`.
pub type Fragments = BTreeMap<String, Value>;

impl Template {
    /// Compiles a YAML value into a template.
    ///
    /// # Errors
    /// [`CompileError`]: the first expression that does not compile, with the expression text.
    pub fn compile(v: &Value) -> Result<Template, CompileError> {
        Template::compile_located(v).map_err(|(_, message)| CompileError { message, at: None })
    }

    /// [`Template::compile`], with the error's place in `v`: the path segments from `v` to
    /// the node that does not compile, and the message.
    ///
    /// # Errors
    /// As [`Template::compile`].
    pub fn compile_located(v: &Value) -> Result<Template, (Vec<crate::path::Segment>, String)> {
        let mut at = Vec::new();
        Template::compile_value(v, &mut at).map_err(|message| (at, message))
    }

    /// Compiles `v`; on an error, `at` holds the path to the node that failed.
    fn compile_value(v: &Value, at: &mut Vec<crate::path::Segment>) -> Result<Template, String> {
        use crate::path::Segment;
        match v {
            Value::String(s) => compile_string(s),
            Value::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    at.push(Segment::Index(i));
                    if let Some(spliced) = single_key(item, "$splice") {
                        at.push(Segment::Key("$splice".to_string()));
                        out.push(Item::Splice(Template::compile_value(spliced, at)?));
                        at.pop();
                    } else {
                        out.push(Item::One(Template::compile_value(item, at)?));
                    }
                    at.pop();
                }
                Ok(Template::List(out))
            }
            Value::Object(map) => {
                if let Some(name) = single_key(map_value(v), "$fragment") {
                    at.push(Segment::Key("$fragment".to_string()));
                    let name = name.as_str().ok_or_else(|| {
                        format!("$fragment takes a fragment name (a string), not {name}")
                    })?;
                    at.pop();
                    return Ok(Template::Fragment(name.to_string()));
                }
                if let Some(cond) = map.get("$if") {
                    let cond = cond
                        .as_str()
                        .ok_or_else(|| "$if takes a CEL expression string".to_string())?;
                    let then = map
                        .get("$then")
                        .ok_or_else(|| "$if needs $then".to_string())?;
                    if let Some(k) = map
                        .keys()
                        .find(|k| !matches!(k.as_str(), "$if" | "$then" | "$else"))
                    {
                        return Err(format!("unexpected key {k:?} beside $if"));
                    }
                    let cond = Expr::compile(strip_braces(cond))
                        .map_err(|e| format!("in $if {cond:?}: {e}"))?;
                    at.push(Segment::Key("$then".to_string()));
                    let then = Template::compile_value(then, at)?;
                    at.pop();
                    let otherwise = match map.get("$else") {
                        Some(e) => {
                            at.push(Segment::Key("$else".to_string()));
                            let e = Template::compile_value(e, at)?;
                            at.pop();
                            Some(Box::new(e))
                        }
                        None => None,
                    };
                    return Ok(Template::If(cond, Box::new(then), otherwise));
                }
                let mut out = Vec::with_capacity(map.len());
                for (k, val) in map {
                    at.push(Segment::Key(k.clone()));
                    out.push((compile_string(k)?, Template::compile_value(val, at)?));
                    at.pop();
                }
                if out.iter().all(|(k, v)| {
                    matches!(k, Template::Literal(_)) && matches!(v, Template::Literal(_))
                }) {
                    return Ok(Template::Literal(v.clone()));
                }
                Ok(Template::Map(out))
            }
            other => Ok(Template::Literal(other.clone())),
        }
    }

    /// True when the template renders to a value known before rendering (no expression, no
    /// fragment, no condition).
    pub(crate) fn is_literal(&self) -> bool {
        matches!(self, Template::Literal(_))
    }

    /// The names every `{$fragment: name}` of the template refers to.
    pub fn fragment_refs(&self, out: &mut Vec<String>) {
        match self {
            Template::Fragment(n) => out.push(n.clone()),
            Template::List(items) => {
                for i in items {
                    match i {
                        Item::One(t) | Item::Splice(t) => t.fragment_refs(out),
                    }
                }
            }
            Template::Map(entries) => {
                for (k, v) in entries {
                    k.fragment_refs(out);
                    v.fragment_refs(out);
                }
            }
            Template::If(_, then, otherwise) => {
                then.fragment_refs(out);
                if let Some(o) = otherwise {
                    o.fragment_refs(out);
                }
            }
            Template::Literal(_) | Template::Expr(_) | Template::Interp(_) => {}
        }
    }

    /// Adds to `uses` how the template reads `params` and the fragments (see [`ParamUses`]).
    /// `bare_ok`: the position carries a string into the output as it is (a value or a part
    /// of text; not a map key, a splice or a `$if` condition).
    pub(crate) fn param_uses(&self, bare_ok: bool, uses: &mut ParamUses) {
        let expr = |e: &Expr, bare_ok: bool, uses: &mut ParamUses| match e.bare_param() {
            Some(x) if bare_ok => {
                uses.bare.insert(x.to_string());
            }
            _ => {
                uses.other.merge(e.param_reads());
                uses.fragments_cel.merge(e.fragment_reads());
            }
        };
        match self {
            Template::Literal(_) => {}
            Template::Expr(e) => expr(e, bare_ok, uses),
            Template::Interp(parts) => {
                for p in parts {
                    if let Part::Expr(e) = p {
                        expr(e, bare_ok, uses);
                    }
                }
            }
            Template::List(items) => {
                for i in items {
                    match i {
                        Item::One(t) => t.param_uses(bare_ok, uses),
                        Item::Splice(t) => t.param_uses(false, uses),
                    }
                }
            }
            Template::Map(entries) => {
                for (k, v) in entries {
                    k.param_uses(false, uses);
                    v.param_uses(bare_ok, uses);
                }
            }
            Template::Fragment(n) => {
                uses.fragments_embedded.insert(n.clone());
            }
            Template::If(cond, then, otherwise) => {
                expr(cond, false, uses);
                then.param_uses(bare_ok, uses);
                if let Some(o) = otherwise {
                    o.param_uses(bare_ok, uses);
                }
            }
        }
    }

    /// Calls `f` with every CEL expression of the template (`${{ … }}` and `$if`).
    pub(crate) fn for_each_expr<'a>(&'a self, f: &mut impl FnMut(&'a Expr)) {
        match self {
            Template::Expr(e) => f(e),
            Template::Interp(parts) => {
                for p in parts {
                    if let Part::Expr(e) = p {
                        f(e);
                    }
                }
            }
            Template::List(items) => {
                for i in items {
                    match i {
                        Item::One(t) | Item::Splice(t) => t.for_each_expr(f),
                    }
                }
            }
            Template::Map(entries) => {
                for (k, v) in entries {
                    k.for_each_expr(f);
                    v.for_each_expr(f);
                }
            }
            Template::If(cond, then, otherwise) => {
                f(cond);
                then.for_each_expr(f);
                if let Some(o) = otherwise {
                    o.for_each_expr(f);
                }
            }
            Template::Literal(_) | Template::Fragment(_) => {}
        }
    }

    /// Renders with `scope` and `fragments`.
    ///
    /// # Errors
    /// The first evaluation error, naming the expression; an unknown fragment; the failure of a
    /// variable or fragment the template reads.
    pub fn render(&self, scope: &Scope, fragments: &Fragments) -> Result<Value, EvaluationError> {
        self.render_checked(scope, fragments)
            .map_err(|e| EvaluationError {
                message: e.to_string(),
            })
    }

    /// [`Template::render`], keeping upstream failures apart.
    pub(crate) fn render_checked(
        &self,
        scope: &Scope,
        fragments: &Fragments,
    ) -> Result<Value, EvalError> {
        Ok(self.render_opt(scope, fragments)?.unwrap_or(Value::Null))
    }

    fn render_opt(&self, scope: &Scope, fragments: &Fragments) -> Result<Rendered, EvalError> {
        Ok(Some(match self {
            Template::Literal(v) => v.clone(),
            Template::Expr(e) => {
                let v = e
                    .eval_checked(scope)
                    .map_err(|err| err.context(|m| evaluating(e, &m)))?;
                cel_json(&v).map_err(|m| EvalError::Own(evaluating(e, &m)))?
            }
            Template::Interp(parts) => {
                let mut s = String::new();
                for p in parts {
                    match p {
                        Part::Text(t) => s.push_str(t),
                        Part::Expr(e) => {
                            let v = e
                                .eval_checked(scope)
                                .map_err(|err| err.context(|m| evaluating(e, &m)))?;
                            s.push_str(&cel_to_text(&v).map_err(EvalError::Own)?);
                        }
                    }
                }
                Value::String(s)
            }
            Template::Fragment(name) => {
                if let Some(m) = scope.fragment_failure(name) {
                    return Err(m.clone());
                }
                fragments
                    .get(name)
                    .cloned()
                    .ok_or_else(|| EvalError::Own(format!("unknown fragment {name:?}")))?
            }
            Template::If(cond, then, otherwise) => {
                let take = cond.eval_bool_checked(scope).map_err(|err| {
                    err.context(|m| format!("evaluating $if {:?}: {m}", cond.text()))
                })?;
                return match (take, otherwise) {
                    (true, _) => then.render_opt(scope, fragments),
                    (false, Some(e)) => e.render_opt(scope, fragments),
                    (false, None) => Ok(None),
                };
            }
            Template::List(items) => {
                let mut out = Vec::new();
                for item in items {
                    match item {
                        Item::One(t) => {
                            if let Some(v) = t.render_opt(scope, fragments)? {
                                // A fragment that is a list splices into the enclosing list.
                                match (t, v) {
                                    (Template::Fragment(_), Value::Array(a)) => out.extend(a),
                                    (_, v) => out.push(v),
                                }
                            }
                        }
                        Item::Splice(t) => match t.render_opt(scope, fragments)? {
                            Some(Value::Array(a)) => out.extend(a),
                            Some(Value::Null) | None => {}
                            Some(other) => {
                                return Err(EvalError::Own(format!(
                                    "$splice needs a list, got {}",
                                    json_type(&other)
                                )));
                            }
                        },
                    }
                }
                Value::Array(out)
            }
            Template::Map(entries) => {
                let mut out = Map::new();
                for (k, v) in entries {
                    let key = match k.render_opt(scope, fragments)? {
                        Some(Value::String(s)) => s,
                        Some(other) => other.to_string(),
                        None => continue,
                    };
                    if let Some(val) = v.render_opt(scope, fragments)? {
                        out.insert(key, val);
                    }
                }
                Value::Object(out)
            }
        }))
    }
}

/// The message of a failed `${{ … }}` expression.
fn evaluating(e: &Expr, err: &str) -> String {
    format!("evaluating ${{{{ {} }}}}: {err}", e.text())
}

/// A JSON type name for messages.
pub fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "mapping",
    }
}

fn map_value(v: &Value) -> &Value {
    v
}

fn single_key<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    let m = v.as_object()?;
    if m.len() == 1 { m.get(key) } else { None }
}

/// `${{ x }}` → `x`; anything else unchanged (so `$if` accepts both spellings).
fn strip_braces(s: &str) -> &str {
    let t = s.trim();
    if !t.starts_with("${{") {
        return s;
    }
    match template_close(t, 3) {
        Some(close) if close + 2 == t.len() => t.get(3..close).map_or(s, str::trim),
        _ => s,
    }
}

/// Splits `s` into text and `${{ … }}` parts; each expression ends at the `}}` that closes it
/// (a `}}` inside a string literal or a map literal does not).
fn compile_string(s: &str) -> Result<Template, String> {
    if !s.contains("${{") {
        return Ok(Template::Literal(Value::String(s.to_string())));
    }
    let mut parts = Vec::new();
    let mut at = 0;
    while let Some(start) = s.get(at..).and_then(|r| r.find("${{")).map(|p| at + p) {
        if start > at {
            parts.push(Part::Text(s.get(at..start).unwrap_or("").to_string()));
        }
        let close =
            template_close(s, start + 3).ok_or_else(|| format!("unterminated ${{{{ in {s:?}"))?;
        let expr_text = s.get(start + 3..close).unwrap_or("").trim();
        parts.push(Part::Expr(
            Expr::compile(expr_text).map_err(|e| format!("in ${{{{ {expr_text} }}}}: {e}"))?,
        ));
        at = close + 2;
    }
    if let Some(rest) = s.get(at..).filter(|r| !r.is_empty()) {
        parts.push(Part::Text(rest.to_string()));
    }
    if let [Part::Expr(e)] = parts.as_slice() {
        return Ok(Template::Expr(e.clone()));
    }
    Ok(Template::Interp(parts))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn scope(v: Value) -> Scope {
        let mut s = Scope::new();
        s.bind("params", &v);
        s
    }

    #[test]
    fn the_cel_libraries_and_optional_syntax() {
        let s = scope(json!({"labels": {"kai.scheduler/queue": "q"}, "n": 3}));
        let e = |t: &str| {
            Expr::compile(t)
                .expect("compiles")
                .eval_json(&s)
                .expect("evals")
        };
        assert_eq!(e("'kai.scheduler/queue' in params.labels"), json!(true));
        assert_eq!(e("params.?missing.orValue('d')"), json!("d"));
        assert_eq!(e("params.?labels.?x.?y.orValue('d')"), json!("d"));
        assert_eq!(e("params.?labels.?x.hasValue()"), json!(false));
        assert_eq!(e("params.?n.orValue(0)"), json!(3));
        assert_eq!(
            e("'a.?b' + params.?labels['kai.scheduler/queue'].orValue('')"),
            json!("a.?bq")
        );
        assert_eq!(e("params.n <= 63"), json!(true));
        assert_eq!(
            e("[['-x','A'],['-x','B']].flatten()"),
            json!(["-x", "A", "-x", "B"])
        );
        assert_eq!(e("['b','a'].join(',')"), json!("b,a"));
        assert_eq!(e("goQuote('a\\x01\"')"), json!("\"a\\x01\\\"\""));
    }

    /// A variable that reads only literals and earlier such variables is constant: computed
    /// for the first scope that reads it and shared by later ones, with the same value. One
    /// that reads the document, an item (also as a method's receiver) or a namespace is not.
    #[test]
    fn constant_variables_are_computed_once_and_shared() {
        let compile = |t: &str| Expr::compile(t).expect("compiles");
        let vars = [
            ("a", compile("{'x': [1, 2]}")),
            ("b", compile("variables.a.x.map(i, i * 2)")),
            ("c", compile("object.y")),
            ("d", compile("key.split('/')")),
            ("e", compile("lists.range(2)")),
            ("f", compile("variables.c + 1")),
        ]
        .map(|(n, e)| (n.to_string(), e));
        let b = VarBindings::new(&vars, []);
        let constant: Vec<&str> = b
            .vars
            .iter()
            .filter(|v| v.constant.is_some())
            .map(|v| v.name.as_ref())
            .collect();
        assert_eq!(constant, ["a", "b"]);
        let read = |object: Value| {
            let mut scope = Scope::new();
            scope.bind("object", &object);
            scope.bind_variables(&b);
            (
                compile("variables.b").eval_json(&scope).expect("b"),
                compile("variables.f").eval_json(&scope).expect("f"),
            )
        };
        assert_eq!(read(json!({"y": 1})), (json!([2, 4]), json!(2)));
        assert!(
            b.vars[1]
                .constant
                .as_ref()
                .is_some_and(|c| c.get().is_some())
        );
        assert_eq!(read(json!({"y": 5})), (json!([2, 4]), json!(6)));
    }

    /// `optMap` and `optFlatMap` are macros of the optional library, which bind their first
    /// argument: they are expanded (by the parser that knows them), never read as calls of an
    /// undefined name.
    #[test]
    fn the_optional_librarys_macros_bind_their_variable() {
        let s = scope(json!({"labels": {"team": "ab"}}));
        let e = |t: &str| {
            Expr::compile(t)
                .expect("compiles")
                .eval_json(&s)
                .expect("evals")
        };
        assert_eq!(
            e("params.?labels.?team.optMap(v, size(v)).orValue(0)"),
            json!(2)
        );
        assert_eq!(
            e("params.?labels.?gone.optMap(v, size(v)).orValue(0)"),
            json!(0)
        );
        assert_eq!(
            e("params.?labels.optFlatMap(l, l.?team).orValue('')"),
            json!("ab")
        );
        let free = crate::sites::free_value_identifiers(
            &Expr::compile("params.?labels.optMap(l, size(l))").expect("compiles"),
        );
        assert_eq!(free, ["params"]);
    }

    #[test]
    fn a_selection_into_a_binding_is_recognised_as_a_path_and_nothing_else_is() {
        let path = |t: &str| {
            Expr::compile(t)
                .expect("compiles")
                .path
                .as_deref()
                .map(|p| {
                    format!(
                        "{} {:?} {} {:?}",
                        p.root, p.steps, p.optional_from, p.default
                    )
                })
        };
        assert_eq!(
            path("object.spec.?dependencies.orValue([])").as_deref(),
            Some("object [\"spec\", \"dependencies\"] 1 Some(Array [])")
        );
        assert_eq!(
            path("variables.ref.?name.orValue('x')").as_deref(),
            Some("__variables__ref [\"name\"] 0 Some(String(\"x\"))")
        );
        assert_eq!(
            path("object.spec.gangScheduler").as_deref(),
            Some("object [\"spec\", \"gangScheduler\"] 2 None")
        );
        // A literal mapping's keys in sorted order, as the JSON of a map CEL builds.
        assert_eq!(
            path("object.?spec.orValue({'b': 1, 'a': ['x']})").as_deref(),
            Some(
                "object [\"spec\"] 0 Some(Object {\"a\": Array [String(\"x\")], \"b\": Number(1)})"
            )
        );
        for not in [
            "object",
            "object.?spec",
            "object.?spec.name.orValue('')",
            "object.spec.orValue({})",
            "object.?spec.orValue({'a': 1, 'a': 2})",
            "object.?spec.orValue({'a': object})",
            "object.?spec.orValue(1u)",
            "has(object.spec)",
            "object.spec['x']",
            "object.spec.x + ''",
        ] {
            assert_eq!(path(not), None, "{not}");
        }
    }

    #[test]
    fn a_path_variable_reads_as_cel_reads_the_same_selection() {
        let doc =
            json!({"spec": {"deps": [{"a": 1}], "nil": null, "s": "str", "m": {"z": 1, "a": 2}}});
        let exprs = [
            "object.spec.deps",
            "object.spec.?deps.orValue([])",
            "object.spec.?missing.orValue('d')",
            "object.?spec.?missing.?deeper.orValue({})",
            "object.spec.nil",
            "object.spec.?nil.orValue('d')",
            "object.spec.?nil.?x.orValue('d')",
            "object.spec.s.x",
            "object.spec.?s.?x.orValue('d')",
            "object.spec.missing",
            "object.spec.m",
        ];
        for text in exprs {
            let e = Expr::compile(text).expect("compiles");
            let mut direct = Scope::new();
            direct.bind("object", &doc);
            let want = e.eval_json(&direct).map_err(|x| x.to_string());
            let mut s = Scope::new();
            s.bind("object", &doc);
            s.bind_variable("v", &e);
            s.bind_variable("w", &Expr::compile("variables.v").expect("compiles"));
            let read = Expr::compile("[variables.v, variables.w]").expect("compiles");
            let got = read.eval_json(&s).map_err(|x| x.to_string());
            match (&want, &got) {
                (Ok(w), Ok(g)) => assert_eq!(g, &json!([w, w]), "{text}"),
                (Err(w), Err(g)) => assert!(g.contains(w.as_str()), "{text}: {g} vs {w}"),
                _ => panic!("{text}: {want:?} vs {got:?}"),
            }
        }
    }

    /// A variable whose value is a view of a part of a document it reads (a conditional, an
    /// index, an element of another variable's list) keeps that part's place: it reads as CEL
    /// reads the expression, a mapping iterates in the document's order, and nothing is
    /// copied.
    #[test]
    fn a_variable_that_views_a_document_part_keeps_its_place() {
        let doc = json!({"spec": {"deps": [{"k": "A"}, {"z": 1, "a": [2, {"y": 3}]}], "n": 1}});
        // (expression, the place kept, the keys a map iterates)
        let cases: [(&str, &[&str], &[&str]); 8] = [
            (
                "size(object.spec.deps) > 1 ? object.spec.deps[1] : {}",
                &["spec", "deps", "1"],
                &["z", "a"],
            ),
            ("object.spec.deps[1].a", &["spec", "deps", "1", "a"], &[]),
            ("[object.spec.deps[0]][0]", &["spec", "deps", "0"], &["k"]),
            (
                "object.spec.n > 5 ? {} : object.spec.deps[0]",
                &["spec", "deps", "0"],
                &["k"],
            ),
            (
                "object.spec.deps.map(d, d)[1]",
                &["spec", "deps", "1"],
                &["z", "a"],
            ),
            // An element of a variable that is itself a place in the document.
            (
                "variables.list[1]",
                &["spec", "deps", "1", "a", "1"],
                &["y"],
            ),
            // An element of a variable's own copy: a place in that copy, which keeps the
            // document's order.
            ("variables.built[1]", &["1"], &["z", "a"]),
            // Built by CEL: a copy, keys sorted.
            (
                "object.spec.n > 5 ? {} : {'b': 1, 'a': 2}",
                &[],
                &["a", "b"],
            ),
        ];
        let bind = |s: &mut Scope, e: &Expr| {
            s.bind("object", &doc);
            s.bind_variable(
                "list",
                &Expr::compile("object.spec.deps[1].a").expect("compiles"),
            );
            s.bind_variable(
                "built",
                &Expr::compile("object.spec.deps.map(d, d)").expect("compiles"),
            );
            s.bind_variable("v", e);
        };
        let read = Expr::compile(
            "[variables.v, typeName(variables.v) == 'map' ? variables.v.map(k, k) : []]",
        )
        .expect("compiles");
        for (text, place, keys) in cases {
            let e = Expr::compile(text).expect("compiles");
            let mut direct = Scope::new();
            bind(&mut direct, &Expr::compile("0").expect("compiles"));
            let want = e.eval_json(&direct).expect(text);
            let mut s = Scope::new();
            bind(&mut s, &e);
            assert_eq!(
                read.eval_json(&s).expect(text),
                json!([want, keys]),
                "{text}"
            );
            let kept = match s
                .lazy(&format!("{VARIABLE_PREFIX}v"))
                .and_then(|l| l.cell.get())
            {
                Some(Ok(Stored::Json { path, .. })) => path.to_vec(),
                _ => vec!["not JSON".to_string()],
            };
            assert_eq!(kept, place, "{text}");
        }
    }

    #[test]
    fn templates_render_values_interpolation_splices_and_ifs() {
        let t = Template::compile(&json!({
            "name": "${{ params.entry }}-runtime",
            "count": "${{ params.n }}",
            "${{ params.key }}": "v",
            "list": ["a", {"$splice": "${{ ['b', 'c'] }}"}, {"$fragment": "more"}],
            "opt": {"$if": "params.n > 5", "$then": "big"},
            "alt": {"$if": "params.n > 5", "$then": "big", "$else": "small"}
        }))
        .expect("compiles");
        let mut frags = Fragments::new();
        frags.insert("more".into(), json!(["d", "e"]));
        let out = t
            .render(&scope(json!({"entry": "wr", "n": 3, "key": "k/x"})), &frags)
            .expect("renders");
        assert_eq!(
            out,
            json!({"name": "wr-runtime", "count": 3, "k/x": "v",
                   "list": ["a", "b", "c", "d", "e"], "alt": "small"})
        );
    }

    fn render(template: Value) -> Result<Value, String> {
        Template::compile(&template)
            .map_err(|e| e.to_string())?
            .render(&scope(json!({"a": 1})), &Fragments::new())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_template_ends_at_the_braces_that_close_it() {
        assert_eq!(
            render(json!("${{ {'a': {'b': 'c'}}.a }}")),
            Ok(json!({"b": "c"}))
        );
        assert_eq!(render(json!("${{ 'x}}y' }}")), Ok(json!("x}}y")));
        assert_eq!(
            render(json!("${{ params.a }}-${{ {'k': 'v'}['k'] }}!")),
            Ok(json!("1-v!"))
        );
        assert_eq!(
            render(json!(
                r#"${{ r'\d}}' + '''a}}"b''' + "\"}}" + (b'}}' == b'}}' ? 'x' : 'y') }}"#
            )),
            Ok(json!(r#"\d}}a}}"b"}}x"#))
        );
        assert_eq!(
            render(json!({"$if": "${{ {'t': true}.t }}", "$then": "yes"})),
            Ok(json!("yes"))
        );
    }

    #[test]
    fn an_unterminated_template_names_the_text() {
        assert_eq!(
            render(json!("a ${{ params.a ")),
            Err(r#"unterminated ${{ in "a ${{ params.a ""#.to_string())
        );
        assert_eq!(
            render(json!("${{ 'x }}")),
            Err(r#"unterminated ${{ in "${{ 'x }}""#.to_string())
        );
    }

    #[test]
    fn rewriting_leaves_string_literals_alone() {
        let e =
            Expr::compile(r"'''it\'s variables.x .?y''' + r'\d' + string(params.?a.orValue(0))")
                .expect("compiles");
        assert_eq!(
            e.eval_json(&scope(json!({"a": 1}))),
            Ok(json!(r"it's variables.x .?y\d1"))
        );
    }

    #[test]
    fn the_cached_matches_answers_as_the_standard_one_and_caches() {
        let cases = [
            ("'abc'.matches('^[a-z]+$')", Ok(json!(true))),
            ("matches('abc', 'b')", Ok(json!(true))),
            ("'ABC'.matches('^[a-z]+$')", Ok(json!(false))),
            (
                "'a'.matches('(')",
                Err("Error executing function 'matches': '(' not a valid regex:\nerror parsing regexp: missing closing ): `(`".to_string()),
            ),
            (
                "'a'.matches(1)",
                Err("function 'matches' does not take (string, int)".to_string()),
            ),
        ];
        for (text, want) in cases {
            let e = Expr::compile(text).expect("compiles");
            assert_eq!(
                e.eval_json(&Scope::new()).map_err(|e| e.to_string()),
                want,
                "{text}"
            );
        }
        assert!(REGEXES.lock().is_ok_and(|c| c.contains_key("^[a-z]+$")));
    }

    #[test]
    fn a_variable_where_a_field_selection_belongs_says_so() {
        let err = Expr::compile("has(variables.v)").map(|_| ()).unwrap_err();
        assert_eq!(
            err.message,
            "invalid argument to has() macro: a variable is not a field; has() tests a field of a map (has(variables.v.f)); test a variable's value instead (variables.v != null)"
        );
        // A field of a variable is what has() tests.
        let field = Expr::compile("has(variables.v.f)").expect("compiles");
        let mut s = Scope::new();
        s.bind_variable("v", &Expr::compile("{'f': 1}").expect("compiles"));
        assert_eq!(field.eval_json(&s).expect("evaluates"), json!(true));
    }

    /// A qualified name a JSON binding answers whole (`object.a.b`) evaluates, and fails, as
    /// the same fields selected one by one on a value that is not a name (`[object][0].a.b`).
    #[test]
    fn a_qualified_name_selects_as_field_by_field() {
        let doc = json!({
            "a": {"b": {"c": 1, "l": [1, 2], "n": null, "s": "x"}, "e": {}},
            "big": {"k0": 0, "k1": 1, "k2": 2, "k3": 3, "k4": 4, "k5": 5, "k6": 6, "k7": 7,
                    "k8": {"x": "deep"}},
            "dotted.key": 1,
            "items": [{"sub": {"v": 1}}, 2],
        });
        let mut s = Scope::new();
        s.bind("object", &doc);
        s.bind_at(
            "part",
            Arc::new(doc.clone()),
            Arc::from(vec!["a".to_string()]),
        );
        s.bind_variable("v", &Expr::compile("{'f': {'g': 2}}").expect("compiles"));
        s.bind_variable("j", &Expr::compile("object.a").expect("compiles"));
        s.bind_cel("c", Cel::Int(4));
        // Bound as a `forEach` item is: a place that steps into a list.
        let at = |path: &[&str]| Arc::from(path.iter().map(|p| p.to_string()).collect::<Vec<_>>());
        s.bind_at("item", Arc::new(doc.clone()), at(&["items", "0"]));
        s.bind_at("other", Arc::new(doc.clone()), at(&["items", "1"]));
        let paths = [
            "a",
            "a.b",
            "a.b.c",
            "a.b.l",
            "a.b.n",
            "a.b.s",
            "a.e",
            "a.b.c.d",
            "a.b.l.x",
            "a.b.n.x",
            "a.b.s.x",
            "a.missing",
            "a.missing.x",
            "a.e.x",
            "big.k8.x",
            "big.k9",
            "dotted",
        ];
        let eval = |text: &str| {
            Expr::compile(text)
                .expect("compiles")
                .eval_json(&s)
                .map_err(|e| e.to_string())
        };
        for path in paths {
            for (name, selected) in [("object", "[object][0]"), ("part", "[part][0]")] {
                assert_eq!(
                    eval(&format!("{name}.{path}")),
                    eval(&format!("{selected}.{path}")),
                    "{name}.{path}"
                );
                assert_eq!(
                    eval(&format!("has({name}.{path})")),
                    eval(&format!("has({selected}.{path})")),
                    "has({name}.{path})"
                );
            }
        }
        assert_eq!(eval("object.a.b.c"), Ok(json!(1)));
        assert_eq!(eval("part.b.s"), Ok(json!("x")));
        assert_eq!(eval("object.big.k8.x"), Ok(json!("deep")));
        assert_eq!(
            eval("object.a.missing"),
            Err("No such key: missing".to_string())
        );
        assert_eq!(eval("variables.v.f.g"), Ok(json!(2)));
        assert_eq!(eval("variables.j.b.c"), Ok(json!(1)));
        assert_eq!(eval("variables.v.f.x"), eval("[variables.v][0].f.x"));
        for path in ["b.c", "missing", "b.c.d", "b.l.x", "e.x"] {
            let text = format!("variables.j.{path}");
            assert_eq!(
                eval(&text),
                eval(&format!("[variables.j][0].{path}")),
                "{text}"
            );
        }
        for path in ["item.sub.v", "item.sub.missing", "item.sub.v.x", "other.x"] {
            let (name, rest) = path.split_once('.').expect("dotted");
            assert_eq!(eval(path), eval(&format!("[{name}][0].{rest}")), "{path}");
        }
        assert_eq!(eval("item.sub.v"), Ok(json!(1)));
        assert_eq!(eval("c.x"), eval("[c][0].x"));
        // A comprehension's variable shadows the binding of the same name.
        assert_eq!(
            eval("[{'a': 5}].all(object, object.a == 5)"),
            Ok(json!(true))
        );
    }

    /// A tree deeper than the limit is refused when it compiles: evaluating (or any later pass
    /// over) a chain of thousands of operators ran out of stack and aborted the process.
    #[test]
    fn expressions_deeper_than_the_limit_are_refused() {
        let chain = |n: usize| vec!["1"; n].join(" + ");
        assert!(Expr::compile(&chain(MAX_AST_DEPTH)).is_ok());
        for (text, depth) in [
            (format!("x > {}", chain(4000)), 4001),
            (format!("a{}", ".b".repeat(300)), 301),
        ] {
            let err = Expr::compile(&text).expect_err("too deep");
            assert_eq!(
                err.message,
                format!(
                    "the expression nests {depth} levels deep (each operator of a chain such as `a + b + c`, field selection and call is a level), more than the limit of 250: split it, or name its parts as variables"
                )
            );
        }
    }

    /// A long expression is quoted on one line and cut in error messages.
    #[test]
    fn error_messages_quote_long_expressions_cut() {
        assert_eq!(shown("a &&\n   b"), "a && b");
        let long = "x".repeat(250);
        assert_eq!(shown(&long), format!("{}…", "x".repeat(200)));
    }

    #[test]
    fn compile_errors_name_the_expression() {
        let err = Template::compile(&json!("${{ params.( }}")).unwrap_err();
        assert!(err.message.starts_with("in ${{ params.( }}"), "{err}");
    }

    #[test]
    fn evaluation_errors_write_values_as_cel_not_as_the_interpreters_debug_form() {
        let err = |text: &str| {
            Expr::compile(text)
                .expect("compiles")
                .eval(&Scope::new())
                .map(|_| ())
                .unwrap_err()
                .to_string()
        };
        let texts = [
            "0.03 + 'a'",
            "2 / 0",
            "2 % 0",
            "[1, 2, 3, 4, 5][7]",
            "9223372036854775807 + 1",
            "-'a'",
            "{'a': 1}[[1]]",
            "1 in 2",
        ];
        assert_eq!(
            texts.map(err),
            [
                "operator '+' does not take 0.03 (double) and \"a\" (string)",
                "division by zero (2 / 0)",
                "remainder by zero (2 % 0)",
                "index 7 is out of bounds",
                "integer overflow: 9223372036854775807 + 1 is out of range",
                "operator '-' does not take string",
                "operator '[]' does not take map and list",
                "operator 'in' does not take int and int",
            ]
        );
    }

    #[test]
    fn message_literals_are_refused_at_compile_not_left_to_panic_in_evaluation() {
        let want = "message literals such as `Foo{a: 1}` are not supported: rules work on JSON \
                    documents; write a map literal such as `{'a': 1}`";
        for text in [
            "Foo{a: 1} == 1",
            "google.protobuf.Int64Value{value: 1} == 1",
            "has(Foo{a: 1}.a)",
            "[1].all(x, Foo{a: x} == x)",
            "{'k': Foo{}}.k",
        ] {
            assert_eq!(
                Expr::compile(text).map(|_| ()).unwrap_err().message,
                want,
                "{text}"
            );
        }
        let map = Expr::compile("{'a': 1}.a == 1").expect("a map literal compiles");
        assert_eq!(map.eval_bool(&Scope::new()), Ok(true));
    }

    #[test]
    fn errors_are_typed_with_codes_and_the_message_alone() {
        use miette::Diagnostic;
        let code = |d: &dyn Diagnostic| d.code().map(|c| c.to_string());
        let compile = Expr::compile("1 +").unwrap_err();
        assert_eq!(code(&compile), Some("nvcre::cel::compile".to_string()));
        let eval = Expr::compile("{}.a")
            .expect("compiles")
            .eval_bool(&Scope::new())
            .unwrap_err();
        assert_eq!(eval.to_string(), "No such key: a");
        assert_eq!(code(&eval), Some("nvcre::cel::evaluate".to_string()));
        let not_bool = Expr::compile("1").expect("compiles");
        assert_eq!(
            not_bool.eval_bool(&Scope::new()).unwrap_err().message,
            "expected bool, got int"
        );
        let bytes = Expr::compile("b'x'").expect("compiles");
        let conv = cel_to_json(&bytes.eval(&Scope::new()).expect("evaluates")).unwrap_err();
        assert_eq!(
            conv.to_string(),
            "a bytes value cannot be written to a manifest"
        );
        assert_eq!(code(&conv), Some("nvcre::cel::to_json".to_string()));
        assert_eq!(
            bytes.eval_json(&Scope::new()).unwrap_err().to_string(),
            "a bytes value cannot be written to a manifest"
        );
        let path = crate::FieldPath::parse("a['b").unwrap_err();
        assert_eq!(path.to_string(), "unterminated key in \"a['b\"");
        assert_eq!(code(&path), Some("nvcre::path::parse".to_string()));
    }
}
