//! The direct form of the plainest expressions: most rule conditions select a few fields of
//! the document and compare them with literals (`has(object.spec)`,
//! `variables.spec.?image.orValue('') != ''`, `size(object.metadata.name) <= 63`). For those the
//! interpreter's generic machinery (a context per evaluation, overload lookup, a boxed value per
//! step) costs several times the work itself. [`Direct`] is such an expression compiled to a
//! tree over the document in place.
//!
//! It answers only where its answer is certainly the interpreter's: every value it reads is a
//! JSON scalar, mapping or list, or a variable holding one; a missing key under a plain
//! select, a select into anything but a mapping, a comparison of values of two kinds, a
//! number that is not an int, anything it does not know: it gives up (`None`) and the
//! interpreter evaluates the expression, with its own value or error. The expressions it takes
//! have no comprehension, so the only CEL cost they incur is a regex scan (`matches`): it
//! reports each scan's length, and the caller charges them once it has answered, in the
//! interpreter's order. The tests below hold it to the interpreter over generated expressions
//! and documents; `tests/tests/properties.rs` holds the shipped rules' findings over generated
//! WorkloadRuns and their Workflows to those of the interpreter alone.

use std::sync::atomic::{AtomicBool, Ordering};

use cel::IdedExpr;
use cel::common::ast::{Expr as AstExpr, LiteralValue, operators};
use cel::common::types::{CelBool, CelInt, CelNull, CelString};
use cel::common::value::Val;
use cel::Value as Cel;
use serde_json::Value;

use super::{Bound, Scope, Stored, at_path, is_lazy_name, literal_json, select_chain};

/// Whether [`Direct`] forms are used (tests turn it off to compare with the interpreter).
static ENABLED: AtomicBool = AtomicBool::new(true);

/// Turns the direct evaluation of the plainest expressions on or off for the whole process
/// (on by default). Off, every expression runs in the CEL interpreter: only for comparing the
/// two in tests and benchmarks; results are the same either way.
#[doc(hidden)]
pub fn set_direct_evaluation(on: bool) {
    ENABLED.store(on, Ordering::Relaxed);
}

/// An expression in direct form (see the module docs).
#[derive(Debug)]
pub(crate) enum Direct {
    /// A literal: null, bool, int, string, `[]` or `{}`.
    Literal(Value),
    /// An identifier, then selects: plain (`.key`) or optional (`.?key`, `[?'key']`).
    Path {
        root: String,
        steps: Vec<(String, bool)>,
    },
    /// `has(<path>.key)`.
    Has { operand: Box<Direct>, key: String },
    /// `<optional>.orValue(<literal>)`.
    OrValue(Box<Direct>, Value),
    /// `<optional>.hasValue()`.
    HasValue(Box<Direct>),
    /// `!x`.
    Not(Box<Direct>),
    /// `a && b`.
    And(Box<Direct>, Box<Direct>),
    /// `a || b`.
    Or(Box<Direct>, Box<Direct>),
    /// `c ? a : b`.
    Cond(Box<Direct>, Box<Direct>, Box<Direct>),
    /// `a == b` (true) or `a != b` (false).
    Equals(bool, Box<Direct>, Box<Direct>),
    /// `a < b`, `a <= b`, `a > b`, `a >= b` of two ints: the operator's name.
    Compare(&'static str, Box<Direct>, Box<Direct>),
    /// `size(x)` or `x.size()` of a string, list or mapping.
    Size(Box<Direct>),
    /// `x in [literals]`.
    InList(Box<Direct>, Vec<Value>),
    /// `x in y`: a key of a mapping, an element of a list.
    In(Box<Direct>, Box<Direct>),
    /// `x[k]`: a mapping's key, a list's index.
    Index(Box<Direct>, Box<Direct>),
    /// `typeName(x)`.
    TypeName(Box<Direct>),
    /// `s.matches(re)`.
    Matches(Box<Direct>, Box<Direct>),
    /// `s.startsWith(t)` (0), `s.endsWith(t)` (1), `s.contains(t)` (2).
    Text(u8, Box<Direct>, Box<Direct>),
    /// A list literal with elements that are not all literals.
    List(Vec<Direct>),
    /// `a + b`: strings, lists, ints (an overflow is the interpreter's error).
    Add(Box<Direct>, Box<Direct>),
    /// `a - b` of ints.
    Subtract(Box<Direct>, Box<Direct>),
    /// `s.split(sep)` with a separator that is not empty.
    Split(Box<Direct>, Box<Direct>),
    /// `list.join()` or `list.join(sep)` of a list of strings.
    Join(Box<Direct>, Option<Box<Direct>>),
    /// `goQuote(s)`.
    GoQuote(Box<Direct>),
}

/// A value met while evaluating a [`Direct`] form.
enum V<'a> {
    /// A JSON value (of the document, a variable or a literal).
    Json(&'a Value),
    Bool(bool),
    Int(i64),
    Str(&'a str),
    /// An optional: with a value, or none.
    Optional(Option<&'a Value>),
    /// A JSON value the expression built (a list, a joined string) that may hold mappings or
    /// lists of a document.
    Owned(Value),
    /// A JSON value the expression built in which every mapping and list is its own: a string,
    /// a list of scalars, a list of such lists.
    Pure(Value),
}

/// A scalar, for comparing.
#[derive(PartialEq, PartialOrd)]
enum Scalar<'a> {
    Null,
    Bool(bool),
    Int(i64),
    Str(&'a str),
}

impl V<'_> {
    /// The JSON value, for a JSON value read or built.
    fn json(&self) -> Option<&Value> {
        match self {
            V::Json(v) => Some(v),
            V::Owned(v) | V::Pure(v) => Some(v),
            _ => None,
        }
    }

    fn scalar(&self) -> Option<Scalar<'_>> {
        Some(match (self, self.json()) {
            (_, Some(Value::Null)) => Scalar::Null,
            (_, Some(Value::Bool(b))) | (V::Bool(b), _) => Scalar::Bool(*b),
            (_, Some(Value::Number(n))) => Scalar::Int(n.as_i64()?),
            (V::Int(i), _) => Scalar::Int(*i),
            (_, Some(Value::String(s))) => Scalar::Str(s),
            (V::Str(s), _) => Scalar::Str(s),
            _ => return None,
        })
    }

    fn bool(&self) -> Option<bool> {
        match self.scalar()? {
            Scalar::Bool(b) => Some(b),
            _ => None,
        }
    }

    fn str(&self) -> Option<&str> {
        match self.scalar()? {
            Scalar::Str(s) => Some(s),
            _ => None,
        }
    }

    fn int(&self) -> Option<i64> {
        match self.scalar()? {
            Scalar::Int(i) => Some(i),
            _ => None,
        }
    }

    /// Whether the value, as an element of a list the expression builds, is no mapping or list
    /// of a document (whose place the interpreter would keep).
    fn is_own(&self) -> bool {
        match self {
            V::Pure(_) | V::Bool(_) | V::Int(_) | V::Str(_) => true,
            V::Json(v) => !v.is_object() && !v.is_array(),
            V::Owned(v) => !v.is_object() && !v.is_array(),
            V::Optional(_) => false,
        }
    }

    /// Whether every element of the list this value is, is [`V::is_own`].
    fn holds_own(&self) -> bool {
        match self {
            V::Pure(_) => true,
            V::Json(Value::Array(items)) => items.iter().all(|v| !v.is_object() && !v.is_array()),
            V::Owned(Value::Array(items)) => items.iter().all(|v| !v.is_object() && !v.is_array()),
            _ => false,
        }
    }

    /// The value as JSON to keep in a list the expression builds.
    fn into_json(self) -> Option<Value> {
        Some(match self {
            V::Json(v) => v.clone(),
            V::Owned(v) | V::Pure(v) => v,
            V::Bool(b) => Value::Bool(b),
            V::Int(i) => Value::from(i),
            V::Str(s) => Value::String(s.to_string()),
            V::Optional(_) => return None,
        })
    }
}

impl Direct {
    /// `e` in direct form, when every part of it has one.
    pub(crate) fn of(e: &IdedExpr) -> Option<Direct> {
        Some(match &e.expr {
            AstExpr::Literal(LiteralValue::Double(_) | LiteralValue::UInt(_)) => return None,
            AstExpr::List(l) if !l.elements.is_empty() => {
                if !l.optional_indices.is_empty() {
                    return None;
                }
                Direct::List(l.elements.iter().map(Direct::of).collect::<Option<_>>()?)
            }
            AstExpr::Literal(_) | AstExpr::List(_) | AstExpr::Map(_) => {
                Direct::Literal(literal_json(e)?)
            }
            AstExpr::Ident(_) => Direct::path(e)?,
            AstExpr::Select(s) if s.test => Direct::Has {
                operand: Box::new(Direct::path(&s.operand)?),
                key: s.field.clone(),
            },
            AstExpr::Select(_) => Direct::path(e)?,
            AstExpr::Call(c) => {
                let arg = |i: usize| Direct::of(c.args.get(i)?).map(Box::new);
                match (c.func_name.as_str(), c.target.as_deref(), c.args.len()) {
                    (operators::OPT_SELECT | operators::OPT_INDEX, None, 2) => Direct::path(e)?,
                    ("orValue", Some(t), 1) => {
                        let default = match &c.args[0].expr {
                            AstExpr::Literal(LiteralValue::Double(_) | LiteralValue::UInt(_)) => {
                                return None;
                            }
                            _ => literal_json(&c.args[0])?,
                        };
                        Direct::OrValue(Box::new(Direct::of(t)?), default)
                    }
                    ("hasValue", Some(t), 0) => Direct::HasValue(Box::new(Direct::of(t)?)),
                    ("size", Some(t), 0) => Direct::Size(Box::new(Direct::of(t)?)),
                    ("size", None, 1) => Direct::Size(arg(0)?),
                    (operators::LOGICAL_NOT, None, 1) => Direct::Not(arg(0)?),
                    (operators::LOGICAL_AND, None, 2) => Direct::And(arg(0)?, arg(1)?),
                    (operators::LOGICAL_OR, None, 2) => Direct::Or(arg(0)?, arg(1)?),
                    (operators::CONDITIONAL, None, 3) => Direct::Cond(arg(0)?, arg(1)?, arg(2)?),
                    (operators::EQUALS, None, 2) => Direct::Equals(true, arg(0)?, arg(1)?),
                    (operators::NOT_EQUALS, None, 2) => Direct::Equals(false, arg(0)?, arg(1)?),
                    (operators::IN, None, 2) => match &c.args[1].expr {
                        AstExpr::List(l) if !l.elements.is_empty() => Direct::InList(
                            arg(0)?,
                            l.elements
                                .iter()
                                .map(|x| match &x.expr {
                                    AstExpr::Literal(
                                        LiteralValue::String(_)
                                        | LiteralValue::Int(_)
                                        | LiteralValue::Boolean(_),
                                    ) => literal_json(x),
                                    _ => None,
                                })
                                .collect::<Option<_>>()?,
                        ),
                        _ => Direct::In(arg(0)?, arg(1)?),
                    },
                    (operators::INDEX, None, 2) => Direct::Index(arg(0)?, arg(1)?),
                    ("typeName", None, 1) => Direct::TypeName(arg(0)?),
                    ("goQuote", None, 1) => Direct::GoQuote(arg(0)?),
                    (operators::ADD, None, 2) => Direct::Add(arg(0)?, arg(1)?),
                    (operators::SUBSTRACT, None, 2) => Direct::Subtract(arg(0)?, arg(1)?),
                    ("split", Some(t), 1) => Direct::Split(Box::new(Direct::of(t)?), arg(0)?),
                    ("join", Some(t), 0) => Direct::Join(Box::new(Direct::of(t)?), None),
                    ("join", Some(t), 1) => Direct::Join(Box::new(Direct::of(t)?), Some(arg(0)?)),
                    ("matches", Some(t), 1) => Direct::Matches(Box::new(Direct::of(t)?), arg(0)?),
                    ("startsWith", Some(t), 1) => {
                        Direct::Text(0, Box::new(Direct::of(t)?), arg(0)?)
                    }
                    ("endsWith", Some(t), 1) => Direct::Text(1, Box::new(Direct::of(t)?), arg(0)?),
                    ("contains", Some(t), 1) => Direct::Text(2, Box::new(Direct::of(t)?), arg(0)?),
                    (
                        op @ (operators::LESS
                        | operators::LESS_EQUALS
                        | operators::GREATER
                        | operators::GREATER_EQUALS),
                        None,
                        2,
                    ) => Direct::Compare(
                        [
                            operators::LESS,
                            operators::LESS_EQUALS,
                            operators::GREATER,
                            operators::GREATER_EQUALS,
                        ]
                        .into_iter()
                        .find(|o| *o == op)?,
                        arg(0)?,
                        arg(1)?,
                    ),
                    _ => return None,
                }
            }
            _ => return None,
        })
    }

    /// `e` as an identifier followed by plain and optional selects.
    fn path(e: &IdedExpr) -> Option<Direct> {
        let (root, steps) = select_chain(e)?;
        Some(Direct::Path { root, steps })
    }

    /// The boolean the expression gives in `scope`, when this form answers it (see the module
    /// docs); `None` leaves it to the interpreter.
    ///
    /// `scans` receives the length in bytes of each text a regex function scanned, in order:
    /// the interpreter charges those to the cost meter, and so must the caller, once this form
    /// answered (charging as it goes would charge twice when it then gives up).
    pub(crate) fn eval_bool(&self, scope: &Scope, scans: &mut Vec<usize>) -> Option<bool> {
        if !ENABLED.load(Ordering::Relaxed) {
            return None;
        }
        self.eval(scope, scans)?.bool()
    }

    /// The value the expression gives in `scope` when it is a string, an int, a bool or null
    /// (a message, a field path, a template's value), as the interpreter gives it; `None`
    /// leaves it to the interpreter. `scans` as for [`Direct::eval_bool`].
    pub(crate) fn eval_scalar(&self, scope: &Scope, scans: &mut Vec<usize>) -> Option<Cel> {
        if !ENABLED.load(Ordering::Relaxed) {
            return None;
        }
        let v = self.eval(scope, scans)?;
        Some(match v.scalar()? {
            Scalar::Null => Cel::Null,
            Scalar::Bool(b) => Cel::Bool(b),
            Scalar::Int(i) => Cel::Int(i),
            Scalar::Str(s) => Cel::String(std::sync::Arc::new(s.to_string())),
        })
    }

    /// The items of the list the expression gives in `scope`, when it builds one whose
    /// mappings and lists are all its own (`[['a', object.x], ['b', object.y]]`): the
    /// interpreter copies such a list to JSON as it is; `None` leaves it to the interpreter.
    /// `scans` as for [`Direct::eval_bool`].
    pub(crate) fn eval_built_list(
        &self,
        scope: &Scope,
        scans: &mut Vec<usize>,
    ) -> Option<Vec<Value>> {
        if !ENABLED.load(Ordering::Relaxed) {
            return None;
        }
        let items = match self.eval(scope, scans)? {
            V::Pure(Value::Array(items)) => items,
            V::Owned(Value::Array(items))
                if items.iter().all(|x| !x.is_object() && !x.is_array()) =>
            {
                items
            }
            _ => return None,
        };
        // The interpreter's uint has no JSON form: a list holding one it keeps as its own.
        if items.iter().any(holds_uint) {
            return None;
        }
        Some(items)
    }

    /// The value the expression gives in `scope`, stored as the interpreter's value would be
    /// stored for a variable (see `Lazy::compute`): a mapping or list of a bound document at its
    /// place (`place_of`), any other JSON value as JSON; `None` leaves it to the interpreter.
    /// `scans` as for [`Direct::eval_bool`].
    pub(crate) fn eval_stored(
        &self,
        scope: &Scope,
        scans: &mut Vec<usize>,
        place_of: impl Fn(&dyn Val) -> Option<(std::sync::Arc<Value>, std::sync::Arc<[String]>)>,
    ) -> Option<Stored> {
        if !ENABLED.load(Ordering::Relaxed) {
            return None;
        }
        let v = self.eval(scope, scans)?;
        if let V::Json(v @ (Value::Object(_) | Value::Array(_))) = v
            && let Some((root, path)) = place_of(crate::view::view(v).as_ref())
        {
            return Some(Stored::Json { root, path });
        }
        // A mapping or list the expression built from parts of a document (`[object.a][0]`) is,
        // in the interpreter, views of those parts, which keep their places; a copy would not.
        if let V::Owned(built) = &v
            && match built {
                Value::Object(_) => true,
                Value::Array(items) => items.iter().any(|x| x.is_object() || x.is_array()),
                _ => false,
            }
        {
            return None;
        }
        let v = v.into_json()?;
        // The interpreter's uint has no JSON form: a value holding one it keeps as its own.
        if holds_uint(&v) {
            return None;
        }
        Some(Stored::json(v))
    }

    fn eval<'a>(&'a self, scope: &'a Scope, scans: &mut Vec<usize>) -> Option<V<'a>> {
        Some(match self {
            Direct::Literal(v) => V::Json(v),
            Direct::Path { root, steps } => {
                let mut cur = match place(scope, root)? {
                    Place::Json(v) => V::Json(v),
                    Place::Bool(b) => V::Bool(b),
                    Place::Int(i) => V::Int(i),
                    Place::Str(s) => V::Str(s),
                };
                for (key, optional) in steps {
                    cur = match (cur, optional) {
                        (V::Json(Value::Object(m)), false) => {
                            V::Json(crate::view::json_field(m, key)?)
                        }
                        (V::Json(Value::Object(m)), true) => {
                            V::Optional(crate::view::json_field(m, key))
                        }
                        (V::Optional(None), true) => V::Optional(None),
                        (V::Optional(Some(Value::Object(m))), true) => {
                            V::Optional(crate::view::json_field(m, key))
                        }
                        _ => return None,
                    };
                }
                cur
            }
            Direct::Has { operand, key } => match operand.eval(scope, scans)?.json()? {
                Value::Object(m) => V::Bool(crate::view::json_field(m, key).is_some()),
                _ => return None,
            },
            Direct::OrValue(o, default) => match o.eval(scope, scans)? {
                V::Optional(Some(v)) => V::Json(v),
                V::Optional(None) => V::Json(default),
                _ => return None,
            },
            Direct::HasValue(o) => match o.eval(scope, scans)? {
                V::Optional(v) => V::Bool(v.is_some()),
                _ => return None,
            },
            Direct::Not(x) => V::Bool(!x.eval(scope, scans)?.bool()?),
            Direct::And(a, b) => match a.eval(scope, scans)?.bool()? {
                false => V::Bool(false),
                true => V::Bool(b.eval(scope, scans)?.bool()?),
            },
            Direct::Or(a, b) => match a.eval(scope, scans)?.bool()? {
                true => V::Bool(true),
                false => V::Bool(b.eval(scope, scans)?.bool()?),
            },
            Direct::Cond(c, a, b) => match c.eval(scope, scans)?.bool()? {
                true => a.eval(scope, scans)?,
                false => b.eval(scope, scans)?,
            },
            Direct::Equals(equal, a, b) => {
                let (a, b) = (a.eval(scope, scans)?, b.eval(scope, scans)?);
                let (a, b) = (a.scalar()?, b.scalar()?);
                if std::mem::discriminant(&a) != std::mem::discriminant(&b) {
                    return None;
                }
                V::Bool((a == b) == *equal)
            }
            Direct::Compare(op, a, b) => {
                let (a, b) = (a.eval(scope, scans)?.int()?, b.eval(scope, scans)?.int()?);
                V::Bool(match *op {
                    operators::LESS => a < b,
                    operators::LESS_EQUALS => a <= b,
                    operators::GREATER => a > b,
                    _ => a >= b,
                })
            }
            Direct::Size(x) => {
                let x = x.eval(scope, scans)?;
                let n = match (x.str(), x.json()) {
                    (Some(s), _) => s.chars().count(),
                    (_, Some(Value::Array(a))) => a.len(),
                    (_, Some(Value::Object(m))) => m.len(),
                    _ => return None,
                };
                V::Int(i64::try_from(n).ok()?)
            }
            Direct::In(x, c) => {
                let (x, c) = (x.eval(scope, scans)?, c.eval(scope, scans)?);
                let x = x.scalar()?;
                match c.json()? {
                    Value::Object(m) => match x {
                        Scalar::Str(k) => V::Bool(crate::view::json_field(m, k).is_some()),
                        _ => return None,
                    },
                    Value::Array(items) => V::Bool(contains(&x, items)?),
                    _ => return None,
                }
            }
            Direct::InList(x, items) => {
                let x = x.eval(scope, scans)?;
                V::Bool(contains(&x.scalar()?, items)?)
            }
            Direct::Index(x, k) => {
                let (x, k) = (x.eval(scope, scans)?, k.eval(scope, scans)?);
                let k = k.scalar()?;
                match (x, k) {
                    (V::Json(Value::Object(m)), Scalar::Str(k)) => {
                        V::Json(crate::view::json_field(m, k)?)
                    }
                    (V::Json(Value::Array(items)), Scalar::Int(i)) => {
                        V::Json(items.get(usize::try_from(i).ok()?)?)
                    }
                    (V::Owned(Value::Object(mut m)), Scalar::Str(k)) => V::Owned(m.remove(k)?),
                    (V::Owned(Value::Array(mut items)), Scalar::Int(i)) => {
                        let i = usize::try_from(i).ok()?;
                        if i >= items.len() {
                            return None;
                        }
                        V::Owned(items.swap_remove(i))
                    }
                    (V::Pure(Value::Array(mut items)), Scalar::Int(i)) => {
                        let i = usize::try_from(i).ok()?;
                        if i >= items.len() {
                            return None;
                        }
                        V::Pure(items.swap_remove(i))
                    }
                    _ => return None,
                }
            }
            Direct::TypeName(x) => {
                let x = x.eval(scope, scans)?;
                V::Str(match (&x, x.json()) {
                    (_, Some(Value::Null)) => "null",
                    (V::Bool(_), _) | (_, Some(Value::Bool(_))) => "bool",
                    (_, Some(Value::Number(n))) => match (n.as_i64(), n.as_u64()) {
                        (Some(_), _) => "int",
                        (None, Some(_)) => "uint",
                        (None, None) => "double",
                    },
                    (V::Int(_), _) => "int",
                    (V::Str(_), _) | (_, Some(Value::String(_))) => "string",
                    (_, Some(Value::Array(_))) => "list",
                    (_, Some(Value::Object(_))) => "map",
                    _ => return None,
                })
            }
            Direct::Matches(text, pattern) => {
                let (text, pattern) = (text.eval(scope, scans)?, pattern.eval(scope, scans)?);
                let (text, pattern) = (text.str()?, pattern.str()?);
                let re = super::cached_regex(pattern).ok()?;
                scans.push(text.len());
                V::Bool(re.is_match(text))
            }
            Direct::Text(how, text, arg) => {
                let (text, arg) = (text.eval(scope, scans)?, arg.eval(scope, scans)?);
                let (text, arg) = (text.str()?, arg.str()?);
                V::Bool(match how {
                    0 => text.starts_with(arg),
                    1 => text.ends_with(arg),
                    _ => text.contains(arg),
                })
            }
            Direct::List(items) => {
                let mut pure = true;
                let mut out = Vec::with_capacity(items.len());
                for x in items {
                    let x = x.eval(scope, scans)?;
                    pure &= x.is_own();
                    out.push(x.into_json()?);
                }
                built(Value::Array(out), pure)
            }
            Direct::Add(a, b) => {
                let (a, b) = (a.eval(scope, scans)?, b.eval(scope, scans)?);
                if let (Some(x), Some(y)) = (a.str(), b.str()) {
                    V::Pure(Value::String(format!("{x}{y}")))
                } else if let (Some(x), Some(y)) = (a.int(), b.int()) {
                    V::Int(x.checked_add(y)?)
                } else if let (Some(Value::Array(_)), Some(Value::Array(_))) = (a.json(), b.json())
                {
                    let pure = a.holds_own() && b.holds_own();
                    let (Some(Value::Array(mut x)), Some(Value::Array(y))) =
                        (a.into_json(), b.into_json())
                    else {
                        return None;
                    };
                    x.extend(y);
                    built(Value::Array(x), pure)
                } else {
                    return None;
                }
            }
            Direct::Subtract(a, b) => {
                let (a, b) = (a.eval(scope, scans)?.int()?, b.eval(scope, scans)?.int()?);
                V::Int(a.checked_sub(b)?)
            }
            Direct::Split(text, sep) => {
                let (text, sep) = (text.eval(scope, scans)?, sep.eval(scope, scans)?);
                let (text, sep) = (text.str()?, sep.str()?);
                if sep.is_empty() {
                    return None;
                }
                V::Pure(Value::Array(
                    text.split(sep)
                        .map(|p| Value::String(p.to_string()))
                        .collect(),
                ))
            }
            Direct::Join(list, sep) => {
                let list = list.eval(scope, scans)?;
                let sep = match sep {
                    Some(sep) => Some(sep.eval(scope, scans)?),
                    None => None,
                };
                let sep = match &sep {
                    Some(sep) => sep.str()?,
                    None => "",
                };
                let Value::Array(items) = list.json()? else {
                    return None;
                };
                let parts = items
                    .iter()
                    .map(Value::as_str)
                    .collect::<Option<Vec<_>>>()?;
                V::Pure(Value::String(parts.join(sep)))
            }
            Direct::GoQuote(x) => {
                let x = x.eval(scope, scans)?;
                V::Pure(Value::String(crate::quote::go_quote(x.str()?)))
            }
        })
    }
}

/// A value the expression built: [`V::Pure`] when `pure`, else [`V::Owned`].
fn built(v: Value, pure: bool) -> V<'static> {
    if pure { V::Pure(v) } else { V::Owned(v) }
}

/// Whether `x` is among `items`, when every one is a scalar of `x`'s kind (`None` otherwise:
/// the interpreter compares values of two kinds).
fn contains(x: &Scalar<'_>, items: &[Value]) -> Option<bool> {
    let mut found = false;
    for item in items {
        let item = V::Json(item);
        let item = item.scalar()?;
        if std::mem::discriminant(x) != std::mem::discriminant(&item) {
            return None;
        }
        found |= *x == item;
    }
    Some(found)
}

/// Whether `v` holds a number only a uint can hold.
fn holds_uint(v: &Value) -> bool {
    match v {
        Value::Number(n) => n.as_i64().is_none() && n.as_u64().is_some(),
        Value::Array(a) => a.iter().any(holds_uint),
        Value::Object(m) => m.values().any(holds_uint),
        _ => false,
    }
}

/// What a binding holds, as [`Scope`]'s resolver reads it.
enum Place<'a> {
    Json(&'a Value),
    Bool(bool),
    Int(i64),
    Str(&'a str),
}

/// The value of binding `name` in `scope`, looked up as the interpreter's resolver looks it up
/// (a variable first, then a bound name), when it is JSON or a scalar.
fn place<'a>(scope: &'a Scope, name: &str) -> Option<Place<'a>> {
    if is_lazy_name(name)
        && let Some(l) = scope.lazy(name)
    {
        return match l.force().as_ref().ok()? {
            s @ Stored::Json { .. } => Some(Place::Json(s.value()?)),
            Stored::Val(v) => scalar_val(v.as_ref()),
        };
    }
    match scope.bound.get(name)? {
        Bound::Json(v) => Some(Place::Json(v)),
        Bound::At { root, path } => Some(Place::Json(at_path(root, path)?)),
        Bound::Val(v) => scalar_val(v.as_ref()),
    }
}

/// A bool, int or string the interpreter holds (a variable computed from literals).
fn scalar_val(v: &dyn Val) -> Option<Place<'_>> {
    if let Some(b) = v.downcast_ref::<CelBool>() {
        return Some(Place::Bool(*b.inner()));
    }
    if let Some(i) = v.downcast_ref::<CelInt>() {
        return Some(Place::Int(*i.inner()));
    }
    if let Some(s) = v.downcast_ref::<CelString>() {
        return Some(Place::Str(s.inner()));
    }
    if v.downcast_ref::<CelNull>().is_some() {
        return Some(Place::Json(&Value::Null));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::Expr;
    use proptest::prelude::*;

    fn key() -> BoxedStrategy<&'static str> {
        prop_oneof![Just("a"), Just("b"), Just("c")].boxed()
    }

    /// JSON documents over three keys, with every kind of value the interpreter tells apart
    /// (a uint, doubles, text beyond ASCII).
    fn json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-2i64..70).prop_map(Value::from),
            Just(Value::from(u64::MAX)),
            Just(Value::from(2.5)),
            Just(Value::from(3.0)),
            prop_oneof![Just(""), Just("a"), Just("abc"), Just("é/x"), Just("a/b")]
                .prop_map(|s| Value::String(s.into())),
        ];
        let value = leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map(key().prop_map(String::from), inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        });
        // A mapping at the top, as a manifest is, so that most selects find something.
        prop::collection::btree_map(key().prop_map(String::from), value, 1..4)
            .prop_map(|m| Value::Object(m.into_iter().collect()))
    }

    /// Expressions over `object` and `other`, in the grammar the direct form takes and a little
    /// beyond it (uint and double literals, `+`).
    fn expr() -> impl Strategy<Value = String> {
        let path = (
            prop_oneof![Just("object"), Just("other")],
            prop::collection::vec((key(), any::<bool>()), 0..3),
        )
            .prop_map(|(root, steps)| {
                let mut s = root.to_string();
                for (k, optional) in steps {
                    s.push_str(if optional { ".?" } else { "." });
                    s.push_str(k);
                }
                s
            })
            .boxed();
        let literal = prop_oneof![
            Just("null"),
            Just("true"),
            Just("false"),
            Just("0"),
            Just("1"),
            Just("3"),
            Just("''"),
            Just("'a'"),
            Just("'abc'"),
            Just("'a/'"),
            Just("[]"),
            Just("{}"),
            Just("2.5"),
            Just("1u"),
            Just("'^[a-c]+$'"),
            Just("{'b': 1, 'a': ['x', 2]}"),
            Just("{'a': {'c': null}}"),
        ]
        .prop_map(String::from)
        .boxed();
        let atom = prop_oneof![
            3 => path.clone(),
            2 => path.clone().prop_map(|p| format!("size({p})")),
            2 => literal.clone(),
            2 => (path.clone(), literal.clone()).prop_map(|(p, l)| format!("{p}.orValue({l})")),
            1 => path.clone().prop_map(|p| format!("{p}.hasValue()")),
            2 => (path.clone(), key()).prop_map(|(p, k)| format!("has({p}.{k})")),
        ];
        let compared = (
            atom.clone(),
            prop_oneof![Just("=="), Just("!="), Just("<"), Just(">="), Just("in")],
            literal.clone(),
        )
            .prop_map(|(a, op, l)| format!("{a} {op} {l}"));
        let atom = prop_oneof![2 => atom, 1 => compared];
        atom.prop_recursive(2, 8, 3, |inner| {
            let two = (inner.clone(), inner.clone());
            prop_oneof![
                inner.clone().prop_map(|x| format!("!({x})")),
                inner.clone().prop_map(|x| format!("size({x})")),
                inner.clone().prop_map(|x| format!("typeName({x})")),
                (inner.clone(), inner.clone(), inner.clone())
                    .prop_map(|(c, a, b)| format!("({c}) ? ({a}) : ({b})")),
                (
                    two,
                    prop_oneof![
                        Just("&&"),
                        Just("||"),
                        Just("=="),
                        Just("!="),
                        Just("<"),
                        Just("<="),
                        Just(">"),
                        Just(">="),
                        Just("in"),
                        Just("+"),
                        Just("-"),
                    ]
                )
                    .prop_map(|((a, b), op)| format!("({a}) {op} ({b})")),
                (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a})[{b}]")),
                (
                    inner.clone(),
                    inner.clone(),
                    prop_oneof![
                        Just("matches"),
                        Just("startsWith"),
                        Just("endsWith"),
                        Just("contains")
                    ]
                )
                    .prop_map(|(a, b, f)| format!("({a}).{f}({b})")),
                inner
                    .clone()
                    .prop_map(|x| format!("({x}) in ['a', 1, true]")),
                inner.clone().prop_map(|x| format!("goQuote({x})")),
                inner.clone().prop_map(|x| format!("({x}).split('/')")),
                (
                    inner.clone(),
                    prop_oneof![Just("()"), Just("(',')"), Just("(1)")]
                )
                    .prop_map(|(x, sep)| format!("({x}).join{sep}")),
                (inner.clone(), inner).prop_map(|(a, b)| format!("[{a}, {b}]")),
            ]
        })
    }

    fn as_json(v: V<'_>) -> Option<Value> {
        v.into_json()
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 8192,
            failure_persistence: None,
            rng_seed: proptest::test_runner::RngSeed::Fixed(0),
            ..ProptestConfig::default()
        })]

        /// Wherever the direct form answers, the interpreter gives the same value (and no
        /// error); the regex scans it reports are the texts `matches` read.
        #[test]
        fn the_direct_form_answers_as_the_interpreter(
            text in expr(),
            object in json(),
            other in json(),
        ) {
            let Ok(e) = Expr::compile(&text) else {
                return Ok(());
            };
            let mut scope = Scope::new();
            scope.bind("object", &object);
            scope.bind("other", &other);
            let Some(direct) = e.direct.as_ref() else {
                return Ok(());
            };
            // A string, int, bool or null answered is the interpreter's CEL value.
            if let Some(scalar) = direct.eval_scalar(&scope, &mut Vec::new()) {
                match e.eval_with(&scope, crate::view::to_cel) {
                    Ok(v) => prop_assert_eq!(&scalar, &v, "{} on {} / {}", text, object, other),
                    Err(err) => prop_assert!(false, "{text}: direct {scalar:?}, interpreter {err}"),
                }
            }
            let mut scans = Vec::new();
            let Some(answer) = direct.eval(&scope, &mut scans).and_then(as_json) else {
                return Ok(());
            };
            let interpreted = e.eval_with(&scope, |v| Ok(crate::view::to_json(v)));
            match interpreted {
                Ok(Some(v)) => prop_assert_eq!(&answer, &v, "{} on {} / {}", text, object, other),
                // A uint has no JSON form on the interpreter's side.
                Ok(None) if holds_uint(&answer) => {}
                other => prop_assert!(
                    false,
                    "{text} on {object} / {other:?}: direct {answer}, interpreter {interpreted:?}",
                    interpreted = other
                ),
            }
        }
    }

    /// The forms the shipped rules use most are taken; what the interpreter decides with more
    /// than JSON (a double, a uint, an error) is not.
    #[test]
    fn plain_conditions_are_taken_and_the_rest_is_left_to_the_interpreter() {
        // (expression, whether it has a direct form)
        let cases = [
            ("has(object.spec)", true),
            ("object.?spec.?image.orValue('') != ''", true),
            ("size(object.metadata.name) <= 63", true),
            ("object.?spec.?framework.?torch.hasValue()", true),
            (
                "typeName(object.a) != 'int' || object.a <= 2147483647",
                true,
            ),
            (
                "object.k in object.labels && object.labels[object.k] == 'q'",
                true,
            ),
            ("object.metadata.name.matches('^[a-z]+$')", true),
            ("'a' + 'b' == 'ab'", true),
            ("object.parts[size(object.parts) - 1]", true),
            (
                "(size(object.v) > 63 ? ['too long'] : []) + [object.e]",
                true,
            ),
            (
                "object.path + '[' + goQuote(object.k) + ']: ' + object.errors.join('; ')",
                true,
            ),
            ("object.k.split('/')", true),
            ("object.a == 2.5", false),
            ("object.a == 1u", false),
            ("object.list.all(x, x > 1)", false),
            ("object.a * 2 == 4", false),
            ("[object.a, ?object.?b]", false),
        ];
        for (t, direct) in cases {
            let e = Expr::compile(t).expect("compiles");
            assert_eq!(e.direct.is_some(), direct, "{t}");
        }
        // A number that is not an int, a key missing under a plain select: the interpreter's.
        let doc = serde_json::json!({"a": 3.0, "metadata": {}});
        let mut scope = Scope::new();
        scope.bind("object", &doc);
        for t in ["object.a <= 3", "size(object.metadata.name) <= 63"] {
            let e = Expr::compile(t).expect("compiles");
            let direct = e.direct.as_ref().expect("direct");
            assert!(direct.eval(&scope, &mut Vec::new()).is_none(), "{t}");
        }
        // A list built of scalars (and lists of them) is listed as JSON; one holding a list of
        // the document is left to the interpreter, which keeps that list's place.
        let doc = serde_json::json!({"a": 3, "l": [1], "metadata": {}});
        scope.bind("object", &doc);
        let built = |t: &str| {
            let e = Expr::compile(t).expect("compiles");
            let direct = e.direct.as_ref().expect("direct");
            direct.eval_built_list(&scope, &mut Vec::new())
        };
        assert_eq!(
            built("[['a', object.a], ['b', object.?b.orValue(0)]] + [['c']]"),
            Some(vec![
                serde_json::json!(["a", 3]),
                serde_json::json!(["b", 0]),
                serde_json::json!(["c"])
            ])
        );
        assert_eq!(built("[object.l]"), None);
        assert_eq!(built("[object.a] + object.l"), Some(vec![3.into(), 1.into()]));
        let e =
            Expr::compile("object.metadata.?name.orValue('x').matches('^x$')").expect("compiles");
        let mut scans = Vec::new();
        assert_eq!(
            e.direct
                .as_ref()
                .expect("direct")
                .eval_bool(&scope, &mut scans),
            Some(true)
        );
        assert_eq!(scans, [1]);
    }
}
