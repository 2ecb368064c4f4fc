//! The named formats of the API server's CEL library that rules call:
//! `format.qualifiedName().validate(s)` and `format.labelValue().validate(s)`; and one of ours,
//! `format.duration().validate(s)`, a Go duration as the controller reads it.
//!
//! `validate` returns `optional.none()` for a valid string, else an optional list of the
//! messages the API server writes for it (the Kubernetes label key and value rules, with their
//! regexes and wording), so a rule can quote them as `kubectl apply` would.

use std::sync::LazyLock;

use regex::Regex;

/// A named format a rule can validate a string against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// A label key or annotation key: `[prefix/]name`.
    QualifiedName,
    /// A label value.
    LabelValue,
    /// A Go duration (`metav1.Duration`, as `timeoutPerJob`): ours, not the API server's.
    Duration,
}

impl Format {
    /// The messages for `s`; empty when it is valid.
    pub(crate) fn validate(self, s: &str) -> Vec<String> {
        match self {
            Format::QualifiedName => qualified_name(s),
            Format::LabelValue => label_value(s),
            Format::Duration => match crate::go_duration::parse(s) {
                Ok(_) => Vec::new(),
                Err(e) => vec![e.go_message(s)],
            },
        }
    }
}

const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and \
    must start and end with an alphanumeric character";
const QUALIFIED_NAME_MAX: usize = 63;
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric \
    characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_MAX: usize = 63;
const SUBDOMAIN_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case \
    alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const SUBDOMAIN_MAX: usize = 253;

/// `pattern` anchored at both ends. The patterns are constants of this module and compile;
/// were one not to, it would match nothing, so every string would be reported invalid.
fn anchored(pattern: &str) -> Option<Regex> {
    Regex::new(&format!("^(?:{pattern})$")).ok()
}

fn is_match(re: &LazyLock<Option<Regex>>, s: &str) -> bool {
    re.as_ref().is_some_and(|r| r.is_match(s))
}

static QUALIFIED_NAME: LazyLock<Option<Regex>> = LazyLock::new(|| anchored(QUALIFIED_NAME_FMT));
static LABEL_VALUE: LazyLock<Option<Regex>> = LazyLock::new(|| anchored(LABEL_VALUE_FMT));
static SUBDOMAIN: LazyLock<Option<Regex>> = LazyLock::new(|| anchored(SUBDOMAIN_FMT));

/// The API server's message for a string that does not match `fmt`, with examples.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let mut s = format!("{msg} (");
    if !examples.is_empty() {
        s.push_str("e.g. ");
        for (i, e) in examples.iter().enumerate() {
            if i > 0 {
                s.push_str(" or ");
            }
            s.push_str(&format!("'{e}', "));
        }
    }
    s.push_str(&format!("regex used for validation is '{fmt}')"));
    s
}

fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

const EMPTY_ERROR: &str = "must be non-empty";

fn qualified_name_regex_error() -> String {
    regex_error(
        QUALIFIED_NAME_MSG,
        QUALIFIED_NAME_FMT,
        &["MyName", "my.name", "123-abc"],
    )
}

/// A lowercase RFC 1123 subdomain (`example.com`).
fn dns1123_subdomain(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > SUBDOMAIN_MAX {
        errs.push(max_len_error(SUBDOMAIN_MAX));
    }
    if !is_match(&SUBDOMAIN, s) {
        errs.push(regex_error(SUBDOMAIN_MSG, SUBDOMAIN_FMT, &["example.com"]));
    }
    errs
}

/// A qualified name: a name of at most 63 characters, with an optional DNS subdomain prefix
/// and `/`. Lengths are in bytes, as the API server counts them.
fn qualified_name(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = s.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push(format!("prefix part {EMPTY_ERROR}"));
            } else {
                errs.extend(
                    dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            return vec![format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. \
                 'example.com/MyName')",
                qualified_name_regex_error()
            )];
        }
    };
    if name.is_empty() {
        errs.push(format!("name part {EMPTY_ERROR}"));
    } else if name.len() > QUALIFIED_NAME_MAX {
        errs.push(format!("name part {}", max_len_error(QUALIFIED_NAME_MAX)));
    }
    if !is_match(&QUALIFIED_NAME, name) {
        errs.push(format!("name part {}", qualified_name_regex_error()));
    }
    errs
}

/// A label value: empty, or a name of at most 63 characters.
fn label_value(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > LABEL_VALUE_MAX {
        errs.push(max_len_error(LABEL_VALUE_MAX));
    }
    if !is_match(&LABEL_VALUE, s) {
        errs.push(regex_error(
            LABEL_VALUE_MSG,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// The API server's messages for `s` as a label key (a qualified name: `[prefix/]name`);
/// empty when it is one.
pub fn label_key_problems(s: &str) -> Vec<String> {
    qualified_name(s)
}

/// The API server's messages for `s` as a label value; empty when it is one.
pub fn label_value_problems(s: &str) -> Vec<String> {
    label_value(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_values_follow_the_label_rules() {
        for ok in [
            "a",
            "A.b-c_d",
            "example.com/a",
            "a.b-c/x_y",
            &"n".repeat(63),
        ] {
            assert_eq!(
                Format::QualifiedName.validate(ok),
                Vec::<String>::new(),
                "{ok}"
            );
        }
        for ok in ["", "v", "my_value", "1.2-3"] {
            assert_eq!(
                Format::LabelValue.validate(ok),
                Vec::<String>::new(),
                "{ok}"
            );
        }
        assert_eq!(
            Format::QualifiedName.validate(&"n".repeat(64)),
            ["name part must be no more than 63 characters"]
        );
        assert_eq!(
            Format::QualifiedName.validate("example.com/"),
            [
                "name part must be non-empty".to_string(),
                format!("name part {}", qualified_name_regex_error())
            ]
        );
        assert_eq!(
            Format::LabelValue
                .validate(&format!("{}-", "v".repeat(63)))
                .len(),
            2
        );
    }
}
