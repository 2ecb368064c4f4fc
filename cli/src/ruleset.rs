//! Which rule set is in force, for `--version` and the machine-readable reports: the embedded
//! set or a `--rules DIR`, with a SHA-256 digest of its files.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use nvcre_engine::Source;
use serde::ser::SerializeStruct;

/// The rule set's identity: serialized as `{source, digest, files}`.
///
/// The digest is computed on first use ([`RulesInfo::digest`]): only `--version` and the JSON
/// and SARIF reports show it, and hashing every rule file was about a tenth of a one-file
/// `check`'s start-up.
#[derive(Debug)]
pub struct RulesInfo {
    /// `embedded`, or the `--rules` directory as given.
    pub source: String,
    /// How many rule files the set has.
    pub files: usize,
    /// The files by their path relative to the set's root, in path order.
    sources: Vec<(String, Arc<Source>)>,
    digest: OnceLock<String>,
}

impl RulesInfo {
    /// The identity of a `--rules` set that cannot be read: its source, no files, and the
    /// digest `none`.
    pub fn unreadable(dir: Option<&Path>) -> RulesInfo {
        RulesInfo {
            source: dir.map_or_else(|| "embedded".to_string(), |d| d.display().to_string()),
            files: 0,
            sources: Vec::new(),
            digest: OnceLock::from("none".to_string()),
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
        // The files are named as read, made UTF-8: so is the root they are taken relative to
        // (a copy of the rules under a name that is not UTF-8 has the same digest).
        let root = dir.map_or_else(|| "rules".to_string(), |d| d.to_string_lossy().into_owned());
        let mut sources: Vec<(String, Arc<Source>)> = sources
            .into_iter()
            .map(|s| {
                let rel = Path::new(&s.name)
                    .strip_prefix(&root)
                    .map_or_else(|_| s.name.clone(), |p| p.display().to_string())
                    .replace('\\', "/");
                (rel, s)
            })
            .collect();
        sources.sort_by(|a, b| (a.0.as_str(), &*a.1.text).cmp(&(b.0.as_str(), &*b.1.text)));
        // The embedded set's digest was computed when it was built (the test
        // `the_embedded_digest_is_the_digest_of_its_files` checks it is this function's).
        let digest = match dir {
            None => OnceLock::from(nvcre_domain::embedded_rules_digest().to_string()),
            Some(_) => OnceLock::new(),
        };
        Ok(RulesInfo {
            source: dir.map_or_else(|| "embedded".to_string(), |d| d.display().to_string()),
            files: sources.len(),
            sources,
            digest,
        })
    }

    /// `sha256:<hex>` over the files' paths relative to the set's root and their contents, in
    /// path order (a `--rules` copy of the shipped `rules/` has the embedded set's digest), or
    /// `none` for a set that could not be read.
    pub fn digest(&self) -> &str {
        self.digest.get_or_init(|| digest_of(&self.sources))
    }

    /// The texts of the set's files, in path order.
    pub fn texts(&self) -> impl Iterator<Item = &str> {
        self.sources.iter().map(|(_, s)| &*s.text)
    }

    /// The `--version` text: the tool's version, then the rule set.
    pub fn version_text(&self) -> String {
        format!(
            "nvcre-policy {}\nrules: {} ({} file{}, {})\n",
            env!("CARGO_PKG_VERSION"),
            self.source,
            self.files,
            if self.files == 1 { "" } else { "s" },
            self.digest()
        )
    }
}

/// `sha256:<hex>` of `sources` (path below the set's root, file), in the order given
/// ([`nvcre_domain::rules_digest`]).
fn digest_of(sources: &[(String, Arc<Source>)]) -> String {
    nvcre_domain::rules_digest(sources.iter().map(|(name, s)| (name.as_str(), &*s.text)))
}

impl serde::Serialize for RulesInfo {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("RulesInfo", 3)?;
        s.serialize_field("source", &self.source)?;
        s.serialize_field("digest", self.digest())?;
        s.serialize_field("files", &self.files)?;
        s.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_digest_is_the_digest_of_its_files() {
        let info = RulesInfo::of(None).expect("the embedded set");
        assert_eq!(info.digest(), digest_of(&info.sources));
        // And a `--rules` copy of the shipped files has it too.
        let copy = RulesInfo::of(Some(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("../rules"),
        ))
        .expect("the rules directory");
        assert_eq!(copy.digest(), info.digest());
    }
}
