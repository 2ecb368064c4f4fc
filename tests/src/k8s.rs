//! Kubernetes label rules as apimachinery states them (`IsQualifiedName`,
//! `IsValidLabelValue`): the oracle the rule files' label checks are compared with.

use std::sync::LazyLock;

use regex::Regex;

/// `qualifiedNameFmt` of apimachinery, anchored.
static NAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$").unwrap_or_else(|e| panic!("{e}"))
});

/// `dns1123SubdomainFmt`, anchored.
static SUBDOMAIN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
        .unwrap_or_else(|e| panic!("{e}"))
});

/// `labelValueFmt`, anchored.
static VALUE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$").unwrap_or_else(|e| panic!("{e}"))
});

/// Longest name part of a qualified name (characters).
pub const NAME_MAX: usize = 63;
/// Longest DNS subdomain prefix (characters).
pub const PREFIX_MAX: usize = 253;
/// Longest label value (characters).
pub const VALUE_MAX: usize = 63;

/// `IsQualifiedName(key)` is empty: an optional DNS-subdomain prefix of at most 253 characters
/// and `/`, then a name part of 1 to 63 characters matching the name pattern.
pub fn is_qualified_name(key: &str) -> bool {
    let parts: Vec<&str> = key.split('/').collect();
    let (prefix, name) = match parts.as_slice() {
        [name] => (None, *name),
        [prefix, name] => (Some(*prefix), *name),
        _ => return false,
    };
    if let Some(p) = prefix
        && (p.is_empty() || p.len() > PREFIX_MAX || !SUBDOMAIN.is_match(p))
    {
        return false;
    }
    !name.is_empty() && name.len() <= NAME_MAX && NAME.is_match(name)
}

/// `IsValidLabelValue(value)` is empty: empty, or at most 63 characters matching the value
/// pattern.
pub fn is_valid_label_value(value: &str) -> bool {
    value.len() <= VALUE_MAX && VALUE.is_match(value)
}

/// Keys NVCRE keeps for the controller: `app.kubernetes.io/managed-by` and any key under
/// `nvcre.nvidia.com/`.
pub fn is_reserved(key: &str) -> bool {
    key == "app.kubernetes.io/managed-by" || key.starts_with("nvcre.nvidia.com/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oracle_knows_the_limits() {
        assert!(is_qualified_name(&"a".repeat(63)));
        assert!(!is_qualified_name(&"a".repeat(64)));
        assert!(is_qualified_name(&format!("{}/a", "b".repeat(253))));
        assert!(!is_qualified_name(&format!("{}/a", "b".repeat(254))));
        assert!(!is_qualified_name("/a"));
        assert!(!is_qualified_name("a/"));
        assert!(!is_qualified_name("a/b/c"));
        assert!(!is_qualified_name("A.com/b"));
        assert!(is_valid_label_value(""));
        assert!(!is_valid_label_value("-a"));
        assert!(!is_valid_label_value(&"a".repeat(64)));
        assert!(is_reserved("nvcre.nvidia.com/x"));
    }
}
