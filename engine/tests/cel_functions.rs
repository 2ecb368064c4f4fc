//! Every CEL function the rule packs call, expression by expression: the exact result, or the
//! exact message a rule author sees. The table is the contract of the CEL library under the
//! engine: a change of library must leave it green (or change it on purpose, in review).

use nvcre_engine::{Expr, Scope};
use serde_json::{Value, json};

/// The scope every case runs in: `object` is a small document, `params` some caller data.
fn scope() -> Scope {
    let mut s = Scope::new();
    s.bind(
        "object",
        &json!({
            "kind": "TrainJob",
            "metadata": {"name": "t", "labels": {"kai.scheduler/queue": "q", "team": "ml"}},
            "spec": {"replicas": 3, "ratio": 0.5, "big": 18446744073709551615u64,
                     "jobs": [{"name": "a", "n": 1}, {"name": "b", "n": 2}], "none": null,
                     "args": [["-x", "A"], ["-y", "B"]]}
        }),
    );
    s.bind("params", &json!({"n": 3, "names": ["b", "a", "c"]}));
    s
}

/// `Ok(json)` for a value, `Err(message)` for a compile or evaluation error.
fn run(text: &str, s: &Scope) -> Result<Value, String> {
    let e = Expr::compile(text).map_err(|e| format!("compile: {e}"))?;
    e.eval_json(s).map_err(|e| e.to_string())
}

fn ok(v: Value) -> Result<Value, String> {
    Ok(v)
}

fn err(m: &str) -> Result<Value, String> {
    Err(m.to_string())
}

const QNAME: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start \
    and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex \
    used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LVALUE: &str = "a valid label must be an empty string or consist of alphanumeric \
    characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. \
    'MyValue',  or 'my_value',  or '12345', regex used for validation is \
    '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric \
    characters, '-' or '.', and must start and end with an alphanumeric character (e.g. \
    'example.com', regex used for validation is \
    '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

fn cases() -> Vec<(&'static str, Result<Value, String>)> {
    let long = "x".repeat(64);
    let long: &'static str = Box::leak(long.into_boxed_str());
    let long_value: &'static str =
        Box::leak(format!("format.labelValue().validate('{long}').value()").into_boxed_str());
    let long_key: &'static str =
        Box::leak(format!("format.qualifiedName().validate('{long}').value()").into_boxed_str());
    vec![
        // Quantities, compared by value.
        (
            "quantity('8000m').isEqualTo(quantity('8'))",
            ok(json!(true)),
        ),
        ("quantity('1k').isEqualTo(quantity('1e3'))", ok(json!(true))),
        (
            "quantity('2Gi').isGreaterThan(quantity('2G'))",
            ok(json!(true)),
        ),
        (
            "quantity('500m').isLessThan(quantity('1'))",
            ok(json!(true)),
        ),
        ("quantity('1Ki').compareTo(quantity('1024'))", ok(json!(0))),
        ("quantity('4000m').asInteger()", ok(json!(4))),
        ("quantity('1500m').isInteger()", ok(json!(false))),
        (
            "quantity('1500m').asInteger()",
            err(
                "Error executing function 'asInteger': asInteger: the quantity is not a whole number that fits an int (test isInteger() first)",
            ),
        ),
        (
            "quantity('8Kb')",
            err(
                "Error executing function 'quantity': \"8Kb\" is not a Kubernetes quantity (a number with an optional SI or binary suffix: 8, 1.5, 500m, 2Ki, 1e3)",
            ),
        ),
        // Selection, optional values.
        ("object.metadata.name", ok(json!("t"))),
        ("object.spec.replicas + 1", ok(json!(4))),
        ("object.spec.ratio * 2.0", ok(json!(1.0))),
        ("object.spec.big", ok(json!(18446744073709551615u64))),
        ("object.spec.none == null", ok(json!(true))),
        ("object.spec.missing", err("No such key: missing")),
        (
            "object.metadata.name.x",
            err("cannot select a field of a string"),
        ),
        ("object.?spec.?replicas.orValue(0)", ok(json!(3))),
        ("object.?spec.?missing.orValue(7)", ok(json!(7))),
        ("object.?spec.?missing.?deeper.orValue('d')", ok(json!("d"))),
        ("object.?spec.?missing.hasValue()", ok(json!(false))),
        ("object.?spec.?replicas.hasValue()", ok(json!(true))),
        ("object.?spec.?replicas.value()", ok(json!(3))),
        (
            "object.metadata.labels[?'team'].orValue('')",
            ok(json!("ml")),
        ),
        (
            "object.metadata.labels[?'nope'].orValue('none')",
            ok(json!("none")),
        ),
        ("object.spec.jobs[?5].orValue({}).size()", ok(json!(0))),
        ("object.spec.jobs[?1].orValue({}).name", ok(json!("b"))),
        (
            "object.?spec.?missing.value()",
            err("Error executing function 'value': optional.none() dereference"),
        ),
        (
            "'kai.scheduler/queue' in object.metadata.labels",
            ok(json!(true)),
        ),
        (
            "object.?spec.?replicas",
            err("a opaque value cannot be written to a manifest"),
        ),
        ("[object.?spec][0].?replicas.orValue(0)", ok(json!(3))),
        ("has(object.spec.replicas)", ok(json!(true))),
        ("has(object.spec.missing)", ok(json!(false))),
        // Equality, whichever side reads the document.
        (
            "object.metadata.labels == {'kai.scheduler/queue': 'q', 'team': 'ml'}",
            ok(json!(true)),
        ),
        (
            "{'kai.scheduler/queue': 'q', 'team': 'ml'} == object.metadata.labels",
            ok(json!(true)),
        ),
        ("{'team': 'ml'} != object.metadata.labels", ok(json!(true))),
        (
            "[{'name': 'a', 'n': 1}, {'name': 'b', 'n': 2}] == object.spec.jobs",
            ok(json!(true)),
        ),
        (
            "object.spec.jobs == [{'name': 'a', 'n': 1}, {'name': 'b', 'n': 2}]",
            ok(json!(true)),
        ),
        ("object.spec.replicas == 3.0", ok(json!(true))),
        ("object.spec.none != null", ok(json!(false))),
        ("object.metadata in [object.metadata]", ok(json!(true))),
        // Macros.
        ("object.spec.jobs.map(j, j.name)", ok(json!(["a", "b"]))),
        (
            "object.spec.jobs.filter(j, j.n > 1).map(j, j.name)",
            ok(json!(["b"])),
        ),
        ("object.spec.jobs.all(j, j.n > 0)", ok(json!(true))),
        ("object.spec.jobs.exists(j, j.n > 1)", ok(json!(true))),
        ("object.spec.jobs.exists_one(j, j.n > 0)", ok(json!(false))),
        (
            "object.metadata.labels.filter(k, k.startsWith('kai'))",
            ok(json!(["kai.scheduler/queue"])),
        ),
        (
            "object.spec.jobs.map(j, j.missing)",
            err("No such key: missing"),
        ),
        // Sizes, strings and conversions.
        ("size(object.spec.jobs)", ok(json!(2))),
        ("object.spec.jobs.size()", ok(json!(2))),
        ("size('héllo')", ok(json!(5))),
        ("size(object.metadata.labels)", ok(json!(2))),
        ("string(3)", ok(json!("3"))),
        ("string(1.5)", ok(json!("1.5"))),
        ("string(true)", ok(json!("true"))),
        ("string('s')", ok(json!("s"))),
        ("string(object.spec.replicas) + 'x'", ok(json!("3x"))),
        ("int('42') + 1", ok(json!(43))),
        ("double(1)", ok(json!(1.0))),
        ("'abc'.startsWith('ab')", ok(json!(true))),
        ("'abc'.endsWith('bc')", ok(json!(true))),
        ("'abc'.contains('d')", ok(json!(false))),
        (
            "'abc'.startsWith(1)",
            err("method 'startsWith' does not take (int) on a string"),
        ),
        ("'a,b,,c'.split(',')", ok(json!(["a", "b", "", "c"]))),
        ("'a,b,c'.split(',', 2)", ok(json!(["a", "b,c"]))),
        ("''.split(',')", ok(json!([""]))),
        ("'a-b-c'.replace('-', '_')", ok(json!("a_b_c"))),
        ("'a-b-c'.replace('-', '_', 1)", ok(json!("a_b-c"))),
        ("'hello'.substring(1)", ok(json!("ello"))),
        ("'hello'.substring(1, 3)", ok(json!("el"))),
        (
            "'hello'.substring(3, 1)",
            err("Error executing function 'substring': invalid substring range. start: 3, end: 1"),
        ),
        (
            "'hello'.substring(9)",
            err("Error executing function 'substring': index out of range: 9"),
        ),
        ("['b', 'a'].join(',')", ok(json!("b,a"))),
        ("['b', 'a'].join()", ok(json!("ba"))),
        ("[].join(',')", ok(json!(""))),
        ("params.names.join('; ')", ok(json!("b; a; c"))),
        ("[1, 2].join(',')", err("expected string, got int")),
        // Lists.
        (
            "object.spec.args.flatten()",
            ok(json!(["-x", "A", "-y", "B"])),
        ),
        ("[1, [2, [3]]].flatten()", ok(json!([1, 2, [3]]))),
        ("[1, [2, [3]]].flatten(2)", ok(json!([1, 2, 3]))),
        ("[].flatten()", ok(json!([]))),
        ("params.names.sort()", ok(json!(["a", "b", "c"]))),
        ("[3, 1, 2].sort()", ok(json!([1, 2, 3]))),
        (
            "[1, 'a'].sort()",
            err("Error executing function 'sort': list elements must have the same type"),
        ),
        ("lists.range(3)", ok(json!([0, 1, 2]))),
        ("lists.range(0)", ok(json!([]))),
        (
            "lists.range(2).map(i, params.names[i])",
            ok(json!(["b", "a"])),
        ),
        ("[1, 2, 3][7]", err("index 7 is out of bounds")),
        // Regexes.
        ("'abc'.matches('^[a-z]+$')", ok(json!(true))),
        ("matches('abc', 'b')", ok(json!(true))),
        ("'ABC'.matches('^[a-z]+$')", ok(json!(false))),
        ("object.metadata.name.matches('^t$')", ok(json!(true))),
        (
            "'a'.matches('(')",
            err(
                "Error executing function 'matches': '(' not a valid regex:\nerror parsing regexp: missing closing ): `(`",
            ),
        ),
        // Regexes are Go's RE2 (Kubernetes CEL compiles them with Go's regexp).
        (r"'ste{,3}p'.matches('^ste{,3}p$')", ok(json!(true))),
        (r"'(x) 7'.matches('^\\Q(x)\\E \\d$')", ok(json!(true))),
        // \d is ASCII; \pL is Unicode.
        ("'\u{663}'.matches('\\\\d')", ok(json!(false))),
        (r"'café'.matches('^\\pL+$')", ok(json!(true))),
        (r"'café'.matches('\\bcaf\\b')", ok(json!(true))),
        (
            "'a'.matches('a**')",
            err(
                "Error executing function 'matches': 'a**' not a valid regex:\nerror parsing regexp: invalid nested repetition operator: `**`",
            ),
        ),
        (
            r"'a'.find('\\u0041')",
            err(
                "Error executing function 'find': invalid regex: error parsing regexp: invalid escape sequence: `\\u`",
            ),
        ),
        (
            "'a'.findAll('x{1001}')",
            err(
                "Error executing function 'findAll': invalid regex: error parsing regexp: invalid repeat count: `{1001}`",
            ),
        ),
        (r"'a1b22'.findAll('\\d+')", ok(json!(["1", "22"]))),
        // Named formats.
        (
            "format.labelValue().validate('ml').hasValue()",
            ok(json!(false)),
        ),
        (
            "format.labelValue().validate('').hasValue()",
            ok(json!(false)),
        ),
        (
            "format.labelValue().validate('-ml').value()",
            ok(json!([LVALUE])),
        ),
        (
            long_value,
            ok(json!(["must be no more than 63 characters"])),
        ),
        (
            "format.qualifiedName().validate('kai.scheduler/queue').hasValue()",
            ok(json!(false)),
        ),
        (
            "format.qualifiedName().validate('team').hasValue()",
            ok(json!(false)),
        ),
        (
            "format.qualifiedName().validate('-team').value()",
            ok(json!([format!("name part {QNAME}")])),
        ),
        (
            long_key,
            ok(json!(["name part must be no more than 63 characters"])),
        ),
        (
            "format.qualifiedName().validate('').value()",
            ok(json!([
                "name part must be non-empty",
                format!("name part {QNAME}")
            ])),
        ),
        (
            "format.qualifiedName().validate('example.com/').value()",
            ok(json!([
                "name part must be non-empty",
                format!("name part {QNAME}")
            ])),
        ),
        (
            "format.qualifiedName().validate('/a').value()",
            ok(json!(["prefix part must be non-empty"])),
        ),
        (
            "format.qualifiedName().validate('Example.com/a').value()",
            ok(json!([format!("prefix part {SUBDOMAIN}")])),
        ),
        (
            "format.qualifiedName().validate('a/b/c').value()",
            ok(json!([format!(
                "a qualified name {QNAME} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            )])),
        ),
        (
            "format.qualifiedName().validate('bad key!').value().join('; ')",
            ok(json!(format!("name part {QNAME}"))),
        ),
        // Our own functions.
        ("typeName(object.spec.jobs)", ok(json!("list"))),
        ("typeName(object.metadata)", ok(json!("map"))),
        ("typeName('s')", ok(json!("string"))),
        ("typeName(1)", ok(json!("int"))),
        ("typeName(1u)", ok(json!("uint"))),
        ("typeName(1.5)", ok(json!("double"))),
        ("typeName(true)", ok(json!("bool"))),
        ("typeName(null)", ok(json!("null"))),
        ("typeName(b'x')", ok(json!("bytes"))),
        ("goQuote('a\\x01\"')", ok(json!("\"a\\x01\\\"\""))),
        ("goQuote(object.metadata.name)", ok(json!("\"t\""))),
        ("'x'.goQuote()", ok(json!("\"x\""))),
        // fieldTypeErrors: the holder's order; a null field is absent; items, values, fields.
        (
            "fieldTypeErrors(object.spec, {'replicas': {'types': ['string'], 'shape': 'a string'}, \
             'none': {'types': ['string'], 'shape': 'a string'}, \
             'jobs': {'types': ['list'], 'shape': 'a list of jobs', 'items': {'types': ['map'], 'shape': 'a job', \
               'fields': {'name': {'types': ['string'], 'shape': 'a string'}, 'n': {'types': ['string'], 'shape': 'a string'}}}}, \
             'args': {'types': ['list'], 'shape': 'a list of lists', 'items': {'types': ['map'], 'shape': 'a map'}}}, 'spec')",
            ok(json!([
                {"at": "spec.replicas", "f": "replicas", "shape": "a string", "got": "int"},
                {"at": "spec.jobs[0].n", "f": "n", "shape": "a string", "got": "int"},
                {"at": "spec.jobs[1].n", "f": "n", "shape": "a string", "got": "int"},
                {"at": "spec.args[0]", "f": "args[0]", "shape": "a map", "got": "list"},
                {"at": "spec.args[1]", "f": "args[1]", "shape": "a map", "got": "list"},
            ])),
        ),
        (
            "fieldTypeErrors(object.metadata, {'labels': {'types': ['map'], 'shape': 'a map', \
               'values': {'types': ['int'], 'shape': 'a number'}}}, 'metadata')",
            ok(json!([
                {"at": "metadata.labels[\"kai.scheduler/queue\"]", "f": "kai.scheduler/queue", "shape": "a number", "got": "string"},
                {"at": "metadata.labels[\"team\"]", "f": "team", "shape": "a number", "got": "string"},
            ])),
        ),
        // A value of a wrong type is not looked into; a map CEL built is walked in key order.
        (
            "fieldTypeErrors({'b': 1, 'a': [1]}, {'a': {'types': ['map'], 'shape': 'a map', 'fields': {}}, \
               'b': {'types': ['string'], 'shape': 'a string'}}, '')",
            ok(json!([
                {"at": ".a", "f": "a", "shape": "a map", "got": "list"},
                {"at": ".b", "f": "b", "shape": "a string", "got": "int"},
            ])),
        ),
        (
            "fieldTypeErrors(object.spec.jobs, {'name': {'types': ['int'], 'shape': 'a number'}}, 'spec.jobs')",
            ok(json!([])),
        ),
        (
            "fieldTypeErrors(object.spec, {'replicas': {'types': 'int', 'shape': 'a number'}}, 'spec')",
            err(
                "Error executing function 'fieldTypeErrors': the table's entry for \"spec.replicas\" is not a map with 'types' (a list of type names) and 'shape' (a string), and optionally 'items', 'values' or 'fields'",
            ),
        ),
        (
            "fieldTypeErrors(object.spec, {'replicas': {'types': ['integer'], 'shape': 'a number'}}, 'spec')",
            err(
                "Error executing function 'fieldTypeErrors': the table's entry for \"spec.replicas\" names the type \"integer\", which is none of typeName's: list, map, string, int, uint, double, bool, null, bytes",
            ),
        ),
        (
            "fieldTypeErrors(object.spec, {'jobs': {'types': ['list'], 'shape': 'a list', 'item': {}}}, 'spec')",
            err(
                "Error executing function 'fieldTypeErrors': the table's entry for \"spec.jobs\" has the key \"item\", which is none of types, shape, items, values, fields",
            ),
        ),
        (
            "fieldTypeErrors(object.spec, [], 'spec')",
            err(
                "Error executing function 'fieldTypeErrors': the fields of \"spec\" are not described by a map of field names to their types",
            ),
        ),
        (
            "fieldTypeErrors(object.spec, {}, 1)",
            err("function 'fieldTypeErrors' does not take (map, map, int)"),
        ),
        // Messages in words.
        (
            "0.03 + 'a'",
            err("operator '+' does not take 0.03 (double) and \"a\" (string)"),
        ),
        ("2 / 0", err("division by zero (2 / 0)")),
        ("2 % 0", err("remainder by zero (2 % 0)")),
        (
            "9223372036854775807 + 1",
            err("integer overflow: 9223372036854775807 + 1 is out of range"),
        ),
        (
            "{'a': 1}[[1]]",
            err("operator '[]' does not take map and list"),
        ),
        ("1 < 'a'", err("operator '<' does not take int and string")),
        (
            "object.spec.jobs < [1]",
            err("operator '<' does not take list and list"),
        ),
        // Ordering: across numeric types, strings, a document's numbers in place; a NaN beside
        // a number orders nothing (false both ways), as CEL and IEEE 754 have it.
        (
            "[1 < 2u, 2.5 >= 2, 'a' < 'b', object.spec.ratio <= 0.5, 3 > object.spec.replicas]",
            ok(json!([true, true, true, true, false])),
        ),
        (
            "[double('NaN') < 1.0, double('NaN') >= 1, 1u > double('NaN'), double('NaN') <= double('NaN'), 0.0 / 0.0 > object.spec.ratio]",
            ok(json!([false, false, false, false, false])),
        ),
        (
            "double('NaN') < 'a'",
            err("operator '<' does not take double and string"),
        ),
        ("{'a': 1, 'a': 2}", err("map literal repeats the key \"a\"")),
        ("nope", err("Undeclared reference to 'nope'")),
        ("nope(1)", err("Undeclared reference to 'nope'")),
        (
            "Foo{a: 1}",
            err(
                "compile: message literals such as `Foo{a: 1}` are not supported: rules work on JSON documents; write a map literal such as `{'a': 1}`",
            ),
        ),
        (
            "1 +",
            err(
                "compile: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER} (expression column 4)",
            ),
        ),
    ]
}

#[test]
fn every_function_the_packs_call_answers_as_recorded() {
    let s = scope();
    let mut wrong = Vec::new();
    for (text, want) in cases() {
        let got = run(text, &s);
        if got != want {
            wrong.push(format!("{text}\n  want {want:?}\n  got  {got:?}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} case(s) differ:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}
