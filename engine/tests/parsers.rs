//! The fast parser the engine tries first builds the very tree the reference parser builds, for
//! every expression of the shipped rule files and for inputs that stress the grammar; where the
//! reference parser refuses a text, the fast one refuses it too.

use std::path::Path;
use std::sync::Arc;

use cel::parser::{Parser, PrattParser};
use nvcre_engine::{Source, parse_documents};
use serde_json::Value;

/// Every string of `v`, and the expression of every `${{ … }}` in it.
fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => {
            out.push(s.clone());
            let mut rest = s.as_str();
            while let Some(start) = rest.find("${{") {
                let after = &rest[start + 3..];
                match after.find("}}") {
                    Some(end) => {
                        out.push(after[..end].trim().to_string());
                        rest = &after[end..];
                    }
                    None => break,
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|x| strings(x, out)),
        Value::Object(m) => m.iter().for_each(|(k, x)| {
            out.push(k.clone());
            strings(x, out);
        }),
        _ => {}
    }
}

/// The tree without its node ids, which the two parsers number in different orders (nothing
/// in the engine reads them but to make fresh ones above the largest).
fn shape(e: &cel::IdedExpr) -> String {
    let ids = regex::Regex::new(r"id: \d+").expect("regex");
    ids.replace_all(&format!("{e:?}"), "id").into_owned()
}

fn rule_texts() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../rules");
    let mut out = Vec::new();
    for entry in walkdir::WalkDir::new(&root).into_iter().flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        let source = Arc::new(Source::new(path.display().to_string(), text));
        for doc in parse_documents(&source).unwrap_or_default() {
            strings(&doc.value, &mut out);
        }
    }
    out
}

#[test]
fn both_parsers_agree_on_every_rule_expression_and_on_hard_cases() {
    // The reference parser recurses deeply in a debug build: a thread with room for it.
    std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(agree)
        .expect("thread")
        .join()
        .expect("no panic");
}

fn agree() {
    let mut texts = rule_texts();
    assert!(texts.len() > 1000, "{} texts", texts.len());
    for hard in [
        "a.?b.?c[?'d'].orValue(1)",
        "[?a, b]",
        "{?'k': v}",
        "x.all(y, y > 1) && x.exists_one(z, z) || x.map(a, a + 1) == x.filter(b, b)",
        "x.map(a, a > 1, a * 2)",
        "has(a.b.c)",
        "1 ? 2 : 3 ? 4 : 5",
        "-(-1) - -1u",
        "'\\x41\\u00e9\\101' + r'\\n' + b'\\xff' + '''a\nb'''",
        "1.5e3 + 0x1F + 07 + 1u",
        "a.b(c)[d].e(f, g)",
        "Foo{a: 1}",
        "google.protobuf.Int64Value{value: 1}",
        ".a.b",
        "in",
        "1 +",
        "((((((((((((((((((((1))))))))))))))))))))",
        "a[",
        "'unterminated",
        "a.?",
        "x.sortBy(y, y)",
        "\u{7f}",
        "",
    ] {
        texts.push(hard.to_string());
    }
    let nested = format!("{}1{}", "[".repeat(40), "]".repeat(40));
    texts.push(nested);
    let mut differ = Vec::new();
    for t in &texts {
        let reference = Parser::default().enable_optional_syntax(true).parse(t);
        let fast = PrattParser::default().enable_optional_syntax(true).parse(t);
        match (&reference, &fast) {
            (Ok(a), Ok(b)) if shape(a) == shape(b) => {}
            (Err(_), Err(_)) => {}
            (Err(_), Ok(_)) => differ.push(format!("only the fast parser accepts {t:?}")),
            (Ok(_), Err(e)) => differ.push(format!("only the reference parser accepts {t:?}: {e}")),
            (Ok(_), Ok(_)) => differ.push(format!("the trees differ for {t:?}")),
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}
