//! Where each compiled expression of a pack or table sits in its file, who owns it (which
//! variables it sees) and what it reads, from the parsed expression rather than its text.
//!
//! The loader checks undefined variables and contract params with these; the lint finds unused
//! variables and fragments with them.

use cel::common::ast::{Expr as Ast, IdedExpr, LiteralValue};

use crate::expr::{Expr, Item, Part, Template, VARIABLE_PREFIX};
use crate::pack::{CompiledPack, FieldPathSpec, Message, Mutation, Table};
use crate::path::FieldPath;

/// Who owns a piece of CEL: decides which variables it can see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Owner {
    /// Match conditions: the pack's variables are not evaluated yet, but visible to the check
    /// as before (they are bound by the time rules run).
    Pack,
    /// Pack variable `i` (raw index in the file).
    PackVar(usize),
    /// Fragment `name`.
    Fragment(String),
    /// Rule `k`'s `forEach.in` (evaluated before the rule's variables).
    RuleForEach(usize),
    /// Rule `k`'s variable `j`.
    RuleVar(usize, usize),
    /// Rule `k`'s `when`, `validate` and `mutate`.
    Rule(usize),
    /// Table entry `i`'s `include` and body.
    Entry(usize),
}

/// One compiled expression with its place in the file.
pub(crate) struct Site<'a> {
    /// Field path of the YAML scalar holding the expression.
    pub(crate) path: FieldPath,
    pub(crate) owner: Owner,
    pub(crate) expr: &'a Expr,
}

/// Which names an expression reads from `variables`, `params` and `fragments`, in the order
/// the parser met them: `ns.name`, `ns.?name`, `ns['name']`, `ns[?'name']`.
#[derive(Debug, Default)]
pub(crate) struct Reads {
    pub(crate) variables: Vec<String>,
    pub(crate) params: Vec<String>,
    pub(crate) fragments: Vec<String>,
}

impl Reads {
    fn push(&mut self, ns: &str, name: &str) {
        let list = match ns {
            "variables" => &mut self.variables,
            "params" => &mut self.params,
            "fragments" => &mut self.fragments,
            _ => return,
        };
        if !list.iter().any(|n| n == name) {
            list.push(name.to_string());
        }
    }
}

/// What `expr` reads (see [`Reads`]).
pub(crate) fn reads(expr: &Expr) -> Reads {
    let mut out = Reads::default();
    visit(expr.ast(), &mut out);
    out
}

/// The identifiers `expr` reads that no comprehension (`exists`, `all`, `map`, …) binds: the
/// names it needs from its scope, in the order the parser met them (`variables.x` counts as
/// `variables`).
pub(crate) fn free_identifiers(expr: &Expr) -> Vec<String> {
    let mut out = Vec::new();
    free(expr.ast(), &mut Vec::new(), &mut out, false);
    out
}

/// CEL's type names, which an expression compares values' types with (`type(x) == map`).
pub(crate) const CEL_TYPES: &[&str] = &[
    "bool",
    "bytes",
    "double",
    "dyn",
    "int",
    "list",
    "map",
    "null_type",
    "string",
    "type",
    "uint",
];

/// [`free_identifiers`] less the names only used as the namespace of a function
/// (`lists.range(3)`, `optional.none()`, `format.duration()`): the values the expression reads.
pub(crate) fn free_value_identifiers(expr: &Expr) -> Vec<String> {
    let mut out = Vec::new();
    free(expr.ast(), &mut Vec::new(), &mut out, true);
    out
}

fn free(e: &IdedExpr, bound: &mut Vec<String>, out: &mut Vec<String>, values: bool) {
    match &e.expr {
        Ast::Ident(name) => {
            let name = if name.starts_with(VARIABLE_PREFIX) {
                "variables"
            } else {
                name.as_str()
            };
            if !bound.iter().any(|b| b == name) && !out.iter().any(|o| o == name) {
                out.push(name.to_string());
            }
        }
        Ast::Select(s) => free(&s.operand, bound, out, values),
        Ast::Call(c) => {
            if let Some(t) = &c.target
                && !(values && matches!(t.expr, Ast::Ident(_)))
            {
                free(t, bound, out, values);
            }
            for a in &c.args {
                free(a, bound, out, values);
            }
        }
        Ast::Comprehension(c) => {
            free(&c.iter_range, bound, out, values);
            free(&c.accu_init, bound, out, values);
            let depth = bound.len();
            bound.push(c.iter_var.clone());
            bound.extend(c.iter_var2.iter().cloned());
            bound.push(c.accu_var.clone());
            for x in [&c.loop_cond, &c.loop_step, &c.result] {
                free(x, bound, out, values);
            }
            bound.truncate(depth);
        }
        Ast::List(l) => l.elements.iter().for_each(|x| free(x, bound, out, values)),
        Ast::Map(m) => {
            for entry in &m.entries {
                if let cel::common::ast::EntryExpr::MapEntry(me) = &entry.expr {
                    free(&me.key, bound, out, values);
                    free(&me.value, bound, out, values);
                }
            }
        }
        Ast::Struct(s) => {
            for entry in &s.entries {
                if let cel::common::ast::EntryExpr::StructField(f) = &entry.expr {
                    free(&f.value, bound, out, values);
                }
            }
        }
        Ast::Literal(_) | Ast::Unspecified => {}
    }
}

fn ident(e: &IdedExpr) -> Option<&str> {
    match &e.expr {
        Ast::Ident(n) => Some(n),
        _ => None,
    }
}

fn string_literal(e: &IdedExpr) -> Option<&str> {
    match &e.expr {
        Ast::Literal(LiteralValue::String(s)) => Some(s.inner()),
        _ => None,
    }
}

fn visit(e: &IdedExpr, out: &mut Reads) {
    match &e.expr {
        Ast::Ident(name) => {
            // `variables.x` is bound as its own identifier (see `expr::rewrite_optional_select`).
            if let Some(v) = name.strip_prefix(VARIABLE_PREFIX) {
                out.push("variables", v);
            }
        }
        Ast::Select(s) => {
            if let Some(ns) = ident(&s.operand) {
                out.push(ns, &s.field);
            }
            visit(&s.operand, out);
        }
        Ast::Call(c) => {
            if matches!(c.func_name.as_str(), "_[_]" | "_[?_]" | "_?._")
                && let (Some(ns), Some(name)) = (
                    c.args.first().and_then(ident),
                    c.args.get(1).and_then(string_literal),
                )
            {
                out.push(ns, name);
            }
            // `'name' in ns` tests the one name, as `has(ns.name)` does.
            if (c.func_name == cel::common::ast::operators::IN
                || c.func_name == crate::expr::MEMBER_FUNCTION)
                && let (Some(name), Some(ns)) = (
                    c.args.first().and_then(string_literal),
                    c.args.get(1).and_then(ident),
                )
            {
                out.push(ns, name);
            }
            if let Some(t) = &c.target {
                visit(t, out);
            }
            for a in &c.args {
                visit(a, out);
            }
        }
        Ast::Comprehension(c) => {
            for x in [
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ] {
                visit(x, out);
            }
        }
        Ast::List(l) => {
            for x in &l.elements {
                visit(x, out);
            }
        }
        Ast::Map(m) => {
            for entry in &m.entries {
                if let cel::common::ast::EntryExpr::MapEntry(me) = &entry.expr {
                    visit(&me.key, out);
                    visit(&me.value, out);
                }
            }
        }
        Ast::Struct(s) => {
            for entry in &s.entries {
                if let cel::common::ast::EntryExpr::StructField(f) = &entry.expr {
                    visit(&f.value, out);
                }
            }
        }
        Ast::Literal(_) | Ast::Unspecified => {}
    }
}

fn root(key: &str) -> FieldPath {
    FieldPath::root().key(key)
}

/// Every expression of a template at `path`: `${{ … }}` parts at their string, `$if`
/// conditions at their `$if` key.
fn template<'a>(t: &'a Template, path: FieldPath, owner: &Owner, out: &mut Vec<Site<'a>>) {
    let site = |path: FieldPath, expr: &'a Expr| Site {
        path,
        owner: owner.clone(),
        expr,
    };
    match t {
        Template::Expr(e) => out.push(site(path, e)),
        Template::Interp(parts) => {
            for p in parts {
                if let Part::Expr(e) = p {
                    out.push(site(path.clone(), e));
                }
            }
        }
        Template::List(items) => {
            for (i, item) in items.iter().enumerate() {
                match item {
                    Item::One(t) => template(t, path.clone().index(i), owner, out),
                    Item::Splice(t) => {
                        template(t, path.clone().index(i).key("$splice"), owner, out);
                    }
                }
            }
        }
        Template::Map(entries) => {
            for (k, v) in entries {
                let at = match k {
                    Template::Literal(serde_json::Value::String(s)) => path.clone().key(s.clone()),
                    // A templated key: its expressions are found at the mapping.
                    other => {
                        template(other, path.clone(), owner, out);
                        path.clone()
                    }
                };
                template(v, at, owner, out);
            }
        }
        Template::If(cond, then, otherwise) => {
            out.push(site(path.clone().key("$if"), cond));
            template(then, path.clone().key("$then"), owner, out);
            if let Some(o) = otherwise {
                template(o, path.key("$else"), owner, out);
            }
        }
        Template::Literal(_) | Template::Fragment(_) => {}
    }
}

/// Every compiled expression of a pack, in file order of its sections.
pub(crate) fn pack_sites(pack: &CompiledPack) -> Vec<Site<'_>> {
    let mut out = Vec::new();
    for ((_, e), i) in pack
        .matcher
        .conditions
        .iter()
        .zip(&pack.matcher.condition_at)
    {
        out.push(Site {
            path: root("match")
                .key("matchConditions")
                .index(*i)
                .key("expression"),
            owner: Owner::Pack,
            expr: e,
        });
    }
    for ((_, e), i) in pack.variables.iter().zip(&pack.variable_at) {
        out.push(Site {
            path: root("variables").index(*i).key("expression"),
            owner: Owner::PackVar(*i),
            expr: e,
        });
    }
    for (name, t) in &pack.fragments {
        let owner = Owner::Fragment(name.clone());
        template(t, root("fragments").key(name.clone()), &owner, &mut out);
    }
    for r in &pack.rules {
        let k = r.index;
        let base = root("rules").index(k);
        let owner = Owner::Rule(k);
        let mut push = |path: FieldPath, owner: Owner, expr| out.push(Site { path, owner, expr });
        if let Some(e) = &r.when {
            push(base.clone().key("when"), owner.clone(), e);
        }
        if let Some((e, _, _)) = &r.for_each {
            push(
                base.clone().key("forEach").key("in"),
                Owner::RuleForEach(k),
                e,
            );
        }
        for (j, (_, e)) in r.variables.iter().enumerate() {
            push(
                base.clone().key("variables").index(j).key("expression"),
                Owner::RuleVar(k, j),
                e,
            );
        }
        if let Some(v) = &r.validate {
            let vb = base.clone().key("validate");
            push(vb.clone().key("expression"), owner.clone(), &v.expression);
            if let Message::Expr(e) = &v.message {
                push(vb.clone().key("messageExpression"), owner.clone(), e);
            }
            if let Some(FieldPathSpec::Expr(e)) = &v.field_path {
                push(vb.clone().key("fieldPathExpression"), owner.clone(), e);
            }
            if let Some(crate::pack::AtSpec::Expr(e)) = &v.at {
                push(vb.key("atExpression"), owner.clone(), e);
            }
        }
        for (j, m) in r.mutate.iter().enumerate() {
            let mb = base.clone().key("mutate").index(j);
            let (t, at) = match m {
                Mutation::Merge { value, .. } => (value, mb.key("merge").key("value")),
                Mutation::Insert { values, end, .. } => {
                    let op = match end {
                        crate::patch::End::Front => "prepend",
                        crate::patch::End::Back => "append",
                    };
                    (values, mb.key(op).key("values"))
                }
                Mutation::JsonPatch(ops) => (ops, mb.key("jsonPatch")),
            };
            template(t, at, &owner, &mut out);
        }
    }
    out
}

impl CompiledPack {
    /// True when a run of the pack may read or write the document's field at `keys` (e.g.
    /// `["spec", "overrides"]`), or a field above or below it: an expression of the pack that
    /// may observe it ([`Expr`]'s reading of `object`: a selection on that path, or any use of
    /// `object` it cannot follow), a merge or insert whose path meets it, or any JSON Patch.
    /// A caller that would leave that field out of the document it hands the pack asks this
    /// first: `false` means no rule's outcome can depend on the field.
    pub fn may_touch(&self, keys: &[&str]) -> bool {
        let known = |(path, answer): &(Vec<String>, bool)| {
            (path.len() == keys.len() && path.iter().zip(keys).all(|(a, b)| a == b))
                .then_some(*answer)
        };
        if let Some(answer) = self
            .touches
            .lock()
            .ok()
            .and_then(|t| t.iter().find_map(known))
        {
            return answer;
        }
        let answer = self.touch_of(keys);
        // A caller asks about a few fixed paths; the list stays short whatever it asks.
        if let Ok(mut t) = self.touches.lock()
            && t.len() < 16
        {
            t.push((keys.iter().map(|k| (*k).to_string()).collect(), answer));
        }
        answer
    }

    fn touch_of(&self, keys: &[&str]) -> bool {
        let meets = |p: &FieldPath| {
            p.segments()
                .iter()
                .zip(keys)
                .all(|(s, k)| !matches!(s, crate::path::Segment::Key(name) if name != k))
        };
        pack_sites(self)
            .iter()
            .any(|s| s.expr.may_observe("object", keys))
            || self.rules.iter().flat_map(|r| &r.mutate).any(|m| match m {
                Mutation::Merge { path, .. } | Mutation::Insert { path, .. } => meets(path),
                Mutation::JsonPatch(_) => true,
            })
    }
}

/// Every compiled expression of a table: fragments, then entries.
pub(crate) fn table_sites(table: &Table) -> Vec<Site<'_>> {
    let mut out = Vec::new();
    for (name, t) in &table.fragments {
        let owner = Owner::Fragment(name.clone());
        template(t, root("fragments").key(name.clone()), &owner, &mut out);
    }
    for e in &table.entries {
        let base = root("entries").index(e.index);
        let owner = Owner::Entry(e.index);
        if let Some(inc) = &e.include {
            out.push(Site {
                path: base.clone().key("include"),
                owner: owner.clone(),
                expr: inc,
            });
        }
        template(&e.body, base, &owner, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_come_from_the_parsed_expression() {
        let e = Expr::compile(
            "variables.a + variables['b'] + variables.?c.orValue(0) + size(params.node) \
             + params[?'x'].orValue(0) + fragments.f + 'variables.zz' + [1].map(v, v + variables.d)",
        )
        .expect("compiles");
        let r = reads(&e);
        assert_eq!(r.variables, ["a", "b", "c", "d"]);
        assert_eq!(r.params, ["node", "x"]);
        assert_eq!(r.fragments, ["f"]);
    }

    /// What an expression may observe of `object.spec.overrides`: a selection on that path
    /// (above it, it, below it; `.?`, `[...]`, `has()`) does, one beside it does not, and any
    /// use the reading cannot follow (passed whole, a computed key, a shadowing comprehension
    /// variable) counts as a read.
    #[test]
    fn an_expression_may_observe_a_field_it_selects_or_cannot_tell() {
        let keys = ["spec", "overrides"];
        for (text, observes) in [
            ("object.spec.jobTemplate.spec.x == 1", false),
            ("object.?spec.?gangScheduler.orValue({})", false),
            ("object.metadata.name + 'x'", false),
            ("has(object.spec.jobTemplate)", false),
            ("object['spec']['jobTemplate'].size()", false),
            ("params.spec.overrides", false),
            ("object.spec.overrides.size()", true),
            ("object.spec.?overrides.orValue([])", true),
            ("object.spec[?'overrides']", true),
            ("has(object.spec.overrides)", true),
            ("object.spec.overrides[0].when", true),
            ("object.spec", true),
            ("size(object) > 0", true),
            ("object.spec[params.key]", true),
            ("[object][0].spec.jobTemplate", true),
            ("[1].map(object, object)", true),
            ("{'a': object.spec}.a.jobTemplate", true),
        ] {
            let e = Expr::compile(text).expect("compiles");
            assert_eq!(e.may_observe("object", &keys), observes, "{text}");
        }
    }

    /// A pack may touch a field when any of its expressions may observe it (variables,
    /// conditions, `forEach`, messages, templates) or a merge or insert meets its path; any
    /// JSON Patch may. The answer is kept per path.
    #[test]
    fn a_pack_may_touch_what_it_reads_or_writes() {
        let pack = |rules: &str| {
            let text = format!(
                "apiVersion: policy.nvcre.nvidia.com/v1alpha1\nkind: RulePack\nmetadata: {{name: p}}\n{rules}"
            );
            let set = crate::RuleSet::from_sources(&[crate::Source::new("rules/p.yaml", text)])
                .expect("pack loads");
            set.packs()[0].clone()
        };
        let keys = ["spec", "overrides"];
        let quiet = "rules:\n- id: a\n  validate: {expression: \"object.spec.jobTemplate.x == 1\", message: m}\n- id: b\n  mutate:\n  - merge: {path: spec.jobTemplate.labels, value: {a: '${{ object.metadata.name }}'}}\n";
        let p = pack(quiet);
        assert!(!p.may_touch(&keys));
        assert!(!p.may_touch(&keys), "kept");
        assert!(p.may_touch(&["spec", "jobTemplate", "x"]));
        assert!(p.may_touch(&["metadata"]));
        for rules in [
            "variables: [{name: v, expression: object.spec}]\nrules:\n- id: a\n  validate: {expression: \"true\", message: m}\n",
            "match:\n  matchConditions: [{name: c, expression: \"has(object.spec.overrides)\"}]\nrules:\n- id: a\n  validate: {expression: \"true\", message: m}\n",
            "rules:\n- id: a\n  forEach: {in: object.spec.overrides, as: o}\n  validate: {expression: \"true\", message: m}\n",
            "rules:\n- id: a\n  validate: {expression: \"false\", messageExpression: \"string(size(object.spec.overrides))\"}\n",
            "rules:\n- id: a\n  mutate:\n  - merge: {path: metadata.labels, value: {a: '${{ string(object.spec.?overrides.orValue([])) }}'}}\n",
            "rules:\n- id: a\n  mutate:\n  - merge: {path: spec, value: {x: 1}}\n",
            "rules:\n- id: a\n  mutate:\n  - append: {path: spec.overrides, values: [{}]}\n",
            "rules:\n- id: a\n  mutate:\n  - jsonPatch: [{op: add, path: /metadata/x, value: 1}]\n",
        ] {
            assert!(pack(rules).may_touch(&keys), "{rules}");
        }
    }
}
