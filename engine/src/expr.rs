//! CEL: compile once, evaluate many times; and YAML templates with embedded CEL.
//!
//! Expressions use `cel` 0.13 (through `kube-cel`, with every Kubernetes CEL library registered:
//! strings, lists, sets, regex, quantity, …) and the optional syntax (`a.?b.orValue(c)`).
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

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use kube_cel::cel;
use kube_cel::cel::objects::{Key, Map as CelMap};
use kube_cel::{KubeCelExt, cel::Value as Cel};
use serde_json::{Map, Value};

thread_local! {
    /// The function table (standard + Kubernetes libraries), built once per thread and kept for
    /// the thread's life so scopes can be child contexts of it.
    static ROOT: &'static cel::Context<'static> = {
        let mut ctx = cel::Context::default().with_all();
        register_types(&mut ctx);
        Box::leak(Box::new(ctx))
    };
}

/// A compiled CEL expression with its source text.
#[derive(Debug, Clone)]
pub struct Expr {
    text: String,
    ast: Arc<cel::parser::Expression>,
    /// Identifiers the expression reads: only those locals are added when it runs.
    refs: Arc<Vec<String>>,
}

/// The prefix under which `variables.<name>` is bound (see [`rewrite_optional_select`]).
pub(crate) const VARIABLE_PREFIX: &str = "__variables__";

impl Expr {
    /// Compiles `text`.
    ///
    /// # Errors
    /// The parser's message (with its position inside the expression).
    pub fn compile(text: &str) -> Result<Expr, String> {
        let parse = |t: &str| {
            cel::parser::Parser::new()
                .enable_optional_syntax(true)
                .parse(t)
        };
        let ast = parse(&rewrite_optional_select(text)).map_err(|_| {
            // Report positions in the text as written, not in the rewritten one.
            match parse(text) {
                Err(errs) => errs
                    .errors
                    .iter()
                    .map(|e| format!("{} (expression column {})", e.msg, e.pos.1))
                    .collect::<Vec<_>>()
                    .join("; "),
                Ok(_) => "does not compile".to_string(),
            }
        })?;
        let refs = ast
            .references()
            .variables()
            .into_iter()
            .map(str::to_string)
            .collect();
        Ok(Expr {
            text: text.to_string(),
            ast: Arc::new(ast),
            refs: Arc::new(refs),
        })
    }

    /// The source text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The parsed expression (as rewritten for evaluation), for reference analysis.
    pub(crate) fn ast(&self) -> &cel::parser::Expression {
        &self.ast
    }

    /// Evaluates against `scope`.
    ///
    /// # Errors
    /// The evaluation error as text (no such key, wrong type, …).
    pub fn eval(&self, scope: &Scope) -> Result<Cel, String> {
        let base = scope.context();
        if scope.locals.is_empty() {
            return Cel::resolve(&self.ast, base).map_err(|e| e.to_string());
        }
        let mut child = base.new_inner_scope();
        // `cel` converts (deep-copies) a value when it is added: add only what is read.
        for name in self.refs.iter() {
            if let Some(v) = scope.locals.get(name) {
                child.add_variable_from_value(name.clone(), v.clone());
            }
        }
        Cel::resolve(&self.ast, &child).map_err(|e| e.to_string())
    }

    /// Evaluates and requires a bool.
    ///
    /// # Errors
    /// Evaluation errors, or `expected bool, got <type>`.
    pub fn eval_bool(&self, scope: &Scope) -> Result<bool, String> {
        match self.eval(scope)? {
            Cel::Bool(b) => Ok(b),
            other => Err(format!("expected bool, got {}", type_name(&other))),
        }
    }

    /// Evaluates and converts the result to JSON.
    ///
    /// # Errors
    /// Evaluation errors, or a value JSON cannot hold (a function, bytes, …).
    pub fn eval_json(&self, scope: &Scope) -> Result<Value, String> {
        cel_to_json(&self.eval(scope)?)
    }
}

/// Rewrites optional field selection `a.?b` into the equivalent optional index `a[?'b']`, and
/// `variables.name` into the identifier `__variables__name`.
///
/// `cel` 0.13 parses `.?` but evaluates it as a plain select (a missing key is an error), while
/// `[?'key']` works; the two are defined as equivalent by the CEL optional-types spec. String
/// literals are left untouched.
fn rewrite_optional_select(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len() + 8);
    let mut i = 0;
    let mut quote: Option<char> = None;
    while let Some(&c) = chars.get(i) {
        if let Some(q) = quote {
            out.push(c);
            if c == '\\' {
                if let Some(&n) = chars.get(i + 1) {
                    out.push(n);
                    i += 1;
                }
            } else if c == q {
                quote = None;
            }
            i += 1;
            continue;
        }
        if c == '"' || c == '\'' {
            quote = Some(c);
            out.push(c);
            i += 1;
            continue;
        }
        // `variables.name` → `__variables__name`: each variable is its own binding, so reading
        // one does not copy all of them (`cel` 0.13 deep-copies a variable on every read).
        if c == 'v'
            && chars
                .get(i..i + 10)
                .is_some_and(|w| w.iter().collect::<String>() == "variables.")
            && !i
                .checked_sub(1)
                .and_then(|p| chars.get(p))
                .is_some_and(|p| p.is_ascii_alphanumeric() || *p == '_' || *p == '.')
        {
            let (end, ident) = ident_at(&chars, i + 10);
            if !ident.is_empty() {
                out.push_str(VARIABLE_PREFIX);
                out.push_str(&ident);
                i = end;
                continue;
            }
        }
        if c == '.' && chars.get(i + 1) == Some(&'?') {
            let (end, ident) = ident_at(&chars, i + 2);
            if !ident.is_empty() {
                out.push_str("[?'");
                out.push_str(&ident);
                out.push_str("']");
                i = end;
                continue;
            }
        }
        out.push(c);
        i += 1;
    }
    out
}

/// The identifier starting at `start` (letters, digits, `_`) and the index just past it.
fn ident_at(chars: &[char], start: usize) -> (usize, String) {
    let mut end = start;
    while chars
        .get(end)
        .is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_')
    {
        end += 1;
    }
    (end, chars.get(start..end).unwrap_or(&[]).iter().collect())
}

/// Variables visible to an expression: top-level names bound to JSON values.
///
/// The CEL context is built once per set of bindings (on the first evaluation after a change)
/// and reused by every expression evaluated in the scope: `cel` converts a variable into its
/// internal form when it is added, so rebuilding per expression would convert the whole
/// document each time.
///
/// Large, long-lived values (`object`, `params`, `fragments`) are bound with [`Scope::bind`];
/// small per-item values (loop variables, `variables`) with [`Scope::bind_local`], which does
/// not rebuild the context.
#[derive(Default)]
pub struct Scope {
    vars: BTreeMap<String, Cel>,
    locals: BTreeMap<String, Cel>,
    ctx: std::rc::Rc<std::cell::OnceCell<cel::Context<'static>>>,
}

impl Clone for Scope {
    /// Clones share the built context until one of them rebinds a base value.
    fn clone(&self) -> Scope {
        Scope {
            vars: self.vars.clone(),
            locals: self.locals.clone(),
            ctx: self.ctx.clone(),
        }
    }
}

impl std::fmt::Debug for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scope")
            .field("vars", &self.vars.keys())
            .finish()
    }
}

impl Scope {
    /// An empty scope.
    pub fn new() -> Scope {
        Scope::default()
    }

    /// Binds `name` to a JSON value.
    pub fn bind(&mut self, name: &str, value: &Value) {
        self.bind_cel(name, json_to_cel(value));
    }

    /// Binds `name` to a CEL value.
    pub fn bind_cel(&mut self, name: &str, value: Cel) {
        self.locals.remove(name);
        self.vars.insert(name.to_string(), value);
        self.ctx = std::rc::Rc::new(std::cell::OnceCell::new());
    }

    /// Binds `name` to a CEL value as a local: evaluations add it on top of the shared context.
    pub fn bind_local(&mut self, name: &str, value: Cel) {
        self.locals.insert(name.to_string(), value);
    }

    fn context(&self) -> &cel::Context<'static> {
        self.ctx.get_or_init(|| {
            let root: &'static cel::Context<'static> = ROOT.with(|r| *r);
            let mut ctx = root.new_inner_scope();
            for (k, v) in &self.vars {
                ctx.add_variable_from_value(k.clone(), v.clone());
            }
            ctx
        })
    }

    /// The value bound to `name`, if any.
    pub fn get(&self, name: &str) -> Option<&Cel> {
        self.locals.get(name).or_else(|| self.vars.get(name))
    }
}

/// The `types` family of our CEL extensions.
///
/// - `typeName(x)` → `'list' | 'map' | 'string' | 'int' | 'uint' | 'double' | 'bool' | 'null' |
///   'bytes'`: `typeName(object.spec.replicatedJobs) == 'list'`. (`cel` 0.13 has no `type()`.)
///
/// And one string function:
///
/// - `goQuote(s)` → `s` quoted as Go's `%q` does (the original's messages quote names and
///   values that way): `goQuote('a\x01')` is `"a\x01"` with the control character escaped.
fn register_types(ctx: &mut cel::Context<'static>) {
    ctx.add_function("typeName", |v: Cel| -> Arc<String> {
        Arc::new(type_name(&v).to_string())
    });
    ctx.add_function(
        "goQuote",
        |cel::extractors::This(s): cel::extractors::This<Arc<String>>| -> Arc<String> {
            Arc::new(crate::quote::go_quote(&s))
        },
    );
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
/// For values JSON cannot represent.
pub fn cel_to_json(v: &Cel) -> Result<Value, String> {
    Ok(match v {
        Cel::Null => Value::Null,
        Cel::Bool(b) => Value::Bool(*b),
        Cel::Int(i) => Value::from(*i),
        Cel::UInt(u) => Value::from(*u),
        Cel::Float(f) => serde_json::Number::from_f64(*f)
            .map(Value::Number)
            .ok_or_else(|| format!("non-finite number {f}"))?,
        Cel::String(s) => Value::String(s.to_string()),
        Cel::List(l) => Value::Array(l.iter().map(cel_to_json).collect::<Result<_, _>>()?),
        Cel::Map(m) => {
            let mut entries: Vec<(String, Value)> = m
                .map
                .iter()
                .map(|(k, v)| Ok((key_string(k), cel_to_json(v)?)))
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
        other => serde_json::to_string(&cel_to_json(other)?).map_err(|e| e.to_string())?,
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
    /// The first expression that does not compile, with the expression text.
    pub fn compile(v: &Value) -> Result<Template, String> {
        match v {
            Value::String(s) => compile_string(s),
            Value::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    if let Some(spliced) = single_key(item, "$splice") {
                        out.push(Item::Splice(Template::compile(spliced)?));
                    } else {
                        out.push(Item::One(Template::compile(item)?));
                    }
                }
                Ok(Template::List(out))
            }
            Value::Object(map) => {
                if let Some(name) = single_key(map_value(v), "$fragment") {
                    let name = name
                        .as_str()
                        .ok_or_else(|| "$fragment takes a fragment name".to_string())?;
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
                    return Ok(Template::If(
                        Expr::compile(strip_braces(cond))
                            .map_err(|e| format!("in $if {cond:?}: {e}"))?,
                        Box::new(Template::compile(then)?),
                        map.get("$else")
                            .map(Template::compile)
                            .transpose()?
                            .map(Box::new),
                    ));
                }
                let mut out = Vec::with_capacity(map.len());
                for (k, val) in map {
                    out.push((compile_string(k)?, Template::compile(val)?));
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

    /// Renders with `scope` and `fragments`.
    ///
    /// # Errors
    /// The first evaluation error, naming the expression; an unknown fragment.
    pub fn render(&self, scope: &Scope, fragments: &Fragments) -> Result<Value, String> {
        Ok(self.render_opt(scope, fragments)?.unwrap_or(Value::Null))
    }

    fn render_opt(&self, scope: &Scope, fragments: &Fragments) -> Result<Rendered, String> {
        Ok(Some(match self {
            Template::Literal(v) => v.clone(),
            Template::Expr(e) => e
                .eval_json(scope)
                .map_err(|err| format!("evaluating ${{{{ {} }}}}: {err}", e.text()))?,
            Template::Interp(parts) => {
                let mut s = String::new();
                for p in parts {
                    match p {
                        Part::Text(t) => s.push_str(t),
                        Part::Expr(e) => {
                            let v = e.eval(scope).map_err(|err| {
                                format!("evaluating ${{{{ {} }}}}: {err}", e.text())
                            })?;
                            s.push_str(&cel_to_text(&v)?);
                        }
                    }
                }
                Value::String(s)
            }
            Template::Fragment(name) => fragments
                .get(name)
                .cloned()
                .ok_or_else(|| format!("unknown fragment {name:?}"))?,
            Template::If(cond, then, otherwise) => {
                let take = cond
                    .eval_bool(scope)
                    .map_err(|err| format!("evaluating $if {:?}: {err}", cond.text()))?;
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
                                return Err(format!(
                                    "$splice needs a list, got {}",
                                    json_type(&other)
                                ));
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
    t.strip_prefix("${{")
        .and_then(|r| r.strip_suffix("}}"))
        .map(str::trim)
        .unwrap_or(s)
}

fn compile_string(s: &str) -> Result<Template, String> {
    if !s.contains("${{") {
        return Ok(Template::Literal(Value::String(s.to_string())));
    }
    let mut parts = Vec::new();
    let mut rest = s;
    while let Some(start) = rest.find("${{") {
        if start > 0 {
            parts.push(Part::Text(rest[..start].to_string()));
        }
        let after = &rest[start + 3..];
        let end = after
            .find("}}")
            .ok_or_else(|| format!("unterminated ${{{{ in {s:?}"))?;
        let expr_text = after[..end].trim();
        parts.push(Part::Expr(
            Expr::compile(expr_text).map_err(|e| format!("in ${{{{ {expr_text} }}}}: {e}"))?,
        ));
        rest = &after[end + 2..];
    }
    if !rest.is_empty() {
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
    fn kubernetes_cel_libraries_and_optional_syntax() {
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
        assert_eq!(
            e("quantity('1Gi').isGreaterThan(quantity('1Mi'))"),
            json!(true)
        );
        assert_eq!(e("[1,2,3].isSorted()"), json!(true));
        assert_eq!(e("params.n <= 63"), json!(true));
        assert_eq!(
            e("[['-x','A'],['-x','B']].flatten()"),
            json!(["-x", "A", "-x", "B"])
        );
        assert_eq!(e("['b','a'].join(',')"), json!("b,a"));
        assert_eq!(e("goQuote('a\\x01\"')"), json!("\"a\\x01\\\"\""));
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

    #[test]
    fn compile_errors_name_the_expression() {
        let err = Template::compile(&json!("${{ params.( }}")).unwrap_err();
        assert!(err.starts_with("in ${{ params.( }}"), "{err}");
    }
}
