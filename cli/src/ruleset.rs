//! Which rule set is in force, for `--version` and the machine-readable reports: the embedded
//! set or a `--rules DIR`, with a SHA-256 digest of its files.

use std::path::Path;

use serde::Serialize;

/// The rule set's identity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RulesInfo {
    /// `embedded`, or the `--rules` directory as given.
    pub source: String,
    /// `sha256:<hex>` over the files' paths relative to the set's root and their contents, in
    /// path order: a `--rules` copy of the shipped `rules/` has the embedded set's digest.
    pub digest: String,
    /// How many rule files the set has.
    pub files: usize,
}

impl RulesInfo {
    /// The identity of a `--rules` set that cannot be read: its source, no files, and the
    /// digest `none`.
    pub fn unreadable(dir: Option<&Path>) -> RulesInfo {
        RulesInfo {
            source: dir.map_or_else(|| "embedded".to_string(), |d| d.display().to_string()),
            digest: "none".to_string(),
            files: 0,
        }
    }

    /// The identity of the embedded set (`dir` `None`) or of the files of `dir` (as `--rules`
    /// reads them).
    ///
    /// # Errors
    /// The message of the first file that cannot be read.
    pub fn of(dir: Option<&Path>) -> Result<RulesInfo, String> {
        let sources = nvcre_domain::rule_sources(dir).map_err(|e| {
            e.errors.first().map_or_else(
                || "the rules cannot be read".to_string(),
                ToString::to_string,
            )
        })?;
        let root = dir.map_or_else(|| Path::new("rules").to_path_buf(), Path::to_path_buf);
        let mut files: Vec<(String, &str)> = sources
            .iter()
            .map(|s| {
                let rel = Path::new(&s.name)
                    .strip_prefix(&root)
                    .map_or_else(|_| s.name.clone(), |p| p.display().to_string())
                    .replace('\\', "/");
                (rel, s.text.as_str())
            })
            .collect();
        files.sort();
        let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
        for (name, text) in &files {
            // Length-prefixed, so no two different sets hash the same bytes.
            ctx.update(&(name.len() as u64).to_be_bytes());
            ctx.update(name.as_bytes());
            ctx.update(&(text.len() as u64).to_be_bytes());
            ctx.update(text.as_bytes());
        }
        let hex: String = ctx
            .finish()
            .as_ref()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Ok(RulesInfo {
            source: dir.map_or_else(|| "embedded".to_string(), |d| d.display().to_string()),
            digest: format!("sha256:{hex}"),
            files: files.len(),
        })
    }

    /// The `--version` text: the tool's version, then the rule set.
    pub fn version_text(&self) -> String {
        format!(
            "nvcre-policy {}\nrules: {} ({} file{}, {})\n",
            env!("CARGO_PKG_VERSION"),
            self.source,
            self.files,
            if self.files == 1 { "" } else { "s" },
            self.digest
        )
    }
}
