//! Input budgets: the limits every YAML/JSON document is parsed within, set once per process
//! (the command line's `--max-*` flags) and read by every parser.
//!
//! The budgets are **per document**: a stream of many honest documents never trips them. Each
//! breach is reported in words naming the limit, its value and the flag that raises it. The
//! CEL cost budgets ([`Limits::cel_cost`], [`Limits::cel_document_cost`]) bound evaluation
//! rather than parsing; [`crate::cost`] enforces them.

use std::sync::OnceLock;

/// The input budgets. See [`Limits::default`] for the values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest document, in bytes (`--max-document-bytes`; default 3 MiB, the API server's
    /// request size limit).
    pub document_bytes: usize,
    /// Deepest nesting of mappings and lists in one document (`--max-depth`; default 64).
    pub depth: usize,
    /// Most alias (`*name`) uses in one document (`--max-aliases`; default 1,000).
    pub aliases: usize,
    /// Most YAML nodes (mappings, lists and scalars) in one document (`--max-yaml-nodes`;
    /// default 250,000). A nodes file gets this budget for every started `document_bytes` of
    /// its size, so a NodeList of thousands of full Node objects (one YAML document) fits.
    pub yaml_nodes: usize,
    /// Largest nodes file, in bytes (`--max-nodes-file-bytes`; default 1 GiB).
    pub nodes_file_bytes: usize,
    /// Most nodes `render --expand` synthesizes without a nodes file (`--max-expand-nodes`;
    /// default 100,000).
    pub expand_nodes: usize,
    /// Most CEL cost units one expression evaluation may use (`--cel-cost-limit`; default
    /// 1,000,000). Units: comprehension iterations, the elements they accumulate, and 64-byte
    /// blocks of regex input (see [`crate::cost`]).
    pub cel_cost: u64,
    /// Most CEL cost units the expressions evaluated on one document may use together
    /// (`--cel-document-cost-limit`; default 10,000,000).
    pub cel_document_cost: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            document_bytes: 3 * 1024 * 1024,
            depth: 64,
            aliases: 1_000,
            yaml_nodes: 250_000,
            nodes_file_bytes: 1024 * 1024 * 1024,
            expand_nodes: 100_000,
            cel_cost: 1_000_000,
            cel_document_cost: 10_000_000,
        }
    }
}

/// The deepest `--max-depth` accepted: the checks walk documents recursively, and a deeper
/// document would exhaust a thread's stack (an abort, not an error).
pub const MAX_DEPTH: usize = 128;

/// The most `--max-expand-nodes` accepted: every made-up node and its place in a group is held
/// in memory (about 4 KB each in a release build).
pub const MAX_EXPAND_NODES: usize = 1_000_000;

static LIMITS: OnceLock<Limits> = OnceLock::new();

/// Sets the process's limits; the first call wins (later calls are ignored and return false).
pub fn set_limits(limits: Limits) -> bool {
    LIMITS.set(limits).is_ok()
}

/// The process's limits ([`Limits::default`] unless [`set_limits`] was called).
pub fn limits() -> Limits {
    LIMITS.get().copied().unwrap_or_default()
}

impl Limits {
    /// serde-saphyr's budget for a text of `bytes` bytes that is one document's worth (`scale`
    /// 1) or a nodes file (`scale` = started `document_bytes` of its size).
    pub(crate) fn budget(&self, scale: usize) -> serde_saphyr::Budget {
        let scale = scale.max(1);
        let nodes = self.yaml_nodes.saturating_mul(scale);
        let mut budget = serde_saphyr::Budget::default();
        budget.max_depth = self.depth;
        budget.max_aliases = self.aliases;
        budget.max_nodes = nodes;
        // Every node is at most a few events; documents, scalar bytes and anchors are bounded
        // by the text's size (itself bounded by `document_bytes` or `nodes_file_bytes`).
        budget.max_events = nodes.saturating_mul(4);
        budget.max_documents = usize::MAX;
        budget.max_anchors = nodes;
        budget.max_total_scalar_bytes = usize::MAX;
        budget.max_reader_input_bytes = None;
        budget
    }

    /// The budget scale of a nodes file of `bytes` bytes: one per started `document_bytes`.
    pub fn scale_for(&self, bytes: usize) -> usize {
        bytes.div_ceil(self.document_bytes.max(1)).max(1)
    }

    /// A budget breach in the user's words: which limit, its value, the flag.
    pub(crate) fn breach_message(
        &self,
        breach: &serde_saphyr::budget::BudgetBreach,
        scale: usize,
    ) -> String {
        use serde_saphyr::budget::BudgetBreach as B;
        let scale = scale.max(1);
        match breach {
            B::Depth { .. } => format!(
                "the document nests mappings and lists deeper than the limit of {} levels (--max-depth)",
                self.depth
            ),
            B::Aliases { .. } => format!(
                "the document uses more than the limit of {} aliases (--max-aliases)",
                self.aliases
            ),
            B::Nodes { .. } | B::Events { .. } | B::Anchors { .. } => {
                if scale > 1 {
                    format!(
                        "the file has more YAML nodes than its limit of {} ({} per {} bytes of file, --max-yaml-nodes)",
                        self.yaml_nodes.saturating_mul(scale),
                        self.yaml_nodes,
                        self.document_bytes
                    )
                } else {
                    format!(
                        "the document has more than the limit of {} YAML nodes (--max-yaml-nodes)",
                        self.yaml_nodes
                    )
                }
            }
            _ => "the document exceeds a YAML safety limit (alias expansion or anchors); simplify its anchors and aliases".to_string(),
        }
    }
}

/// Reads `reader` to its end as UTF-8 text, but never more than `limit` bytes (one more is read
/// to know the input is larger): memory stops growing at the limit.
///
/// # Errors
/// The message a user reads: `reading <name>: <cause>`; `<name>: larger than the limit of N
/// bytes (<flag>)`; `<name>: not UTF-8 text: invalid byte at offset N`.
pub fn read_text_limited(
    reader: impl std::io::Read,
    name: &str,
    limit: usize,
    flag: &str,
) -> Result<String, String> {
    use std::io::Read;
    let mut bytes = Vec::new();
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    reader
        .take(cap)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("reading {name}: {}", io_error_text(&e)))?;
    if bytes.len() > limit {
        return Err(format!(
            "{name}: larger than the limit of {limit} bytes ({flag})"
        ));
    }
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "{name}: {}",
            invalid_utf8(e.as_bytes(), e.utf8_error().valid_up_to(), None)
        )
    })
}

/// What is wrong with text that is not UTF-8, from where it stops being UTF-8: a file that
/// starts with a UTF-16 byte-order mark (what PowerShell's `>` writes) is named as UTF-16 with
/// the fix, any other as `not UTF-8 text: invalid byte 0x.. at byte offset N` (and `(line L)`
/// when given).
pub(crate) fn invalid_utf8(start: &[u8], offset: usize, line: Option<usize>) -> String {
    let encoding = match start {
        [0xFF, 0xFE, ..] if offset == 0 => Some("UTF-16LE"),
        [0xFE, 0xFF, ..] if offset == 0 => Some("UTF-16BE"),
        _ => None,
    };
    if let Some(encoding) = encoding {
        return format!(
            "the file is {encoding} (it starts with that byte-order mark); convert it to UTF-8 first, e.g. iconv -f UTF-16 -t UTF-8"
        );
    }
    let byte = start.get(offset).copied().unwrap_or(0);
    match line {
        Some(l) => {
            format!("not UTF-8 text: invalid byte 0x{byte:02x} at byte offset {offset} (line {l})")
        }
        None => format!("not UTF-8 text: invalid byte 0x{byte:02x} at byte offset {offset}"),
    }
}

/// An I/O error in plain words: the system's description without its ` (os error N)` code,
/// starting lower-case (`no such file or directory`), as the other messages do.
pub fn io_error_text(e: &std::io::Error) -> String {
    let text = e.to_string();
    let text = match text.rfind(" (os error ") {
        Some(i) if text.ends_with(')') => text[..i].to_string(),
        _ => text,
    };
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errors_in_words() {
        let texts: Vec<String> = [2, 13, 21, 20]
            .into_iter()
            .map(|code| io_error_text(&std::io::Error::from_raw_os_error(code)))
            .collect();
        assert_eq!(
            texts,
            [
                "no such file or directory",
                "permission denied",
                "is a directory",
                "not a directory"
            ]
        );
        assert_eq!(
            io_error_text(&std::io::Error::other(
                "Read-only file system (os error 30)"
            )),
            "read-only file system"
        );
    }
}
