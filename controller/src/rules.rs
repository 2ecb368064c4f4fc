//! The rule set in force, and its reload from a mounted directory.
//!
//! [`RulesHolder`] keeps the last good [`RuleSet`] behind an `RwLock<Arc<_>>`: a reconcile takes
//! an `Arc` (one cheap clone) and keeps it for the whole reconcile, so a reload never changes the
//! rules under a running decision. [`RulesHolder::poll`] compares a fingerprint of the directory
//! (every entry's path, size and modification time, following symlinks, plus the target of the
//! kubelet's `..data` symlink, which changes atomically on every ConfigMap update) with the last
//! one and reloads on a change. A set that fails to load is refused: the error is logged, counted
//! and reported by `/readyz`, and the last good set stays in force.
//!
//! Polling (every few seconds) was chosen over inotify (`notify`): the kubelet swaps the `..data`
//! symlink, which inotify reports only on the directory and not at all through some volume
//! types, and polling one small directory costs nothing.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

use nvcre_engine::RuleSet;

/// Where the rules come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RulesSource {
    /// The rules embedded in the binary (never reloaded).
    BuiltIn,
    /// A directory (a ConfigMap mount), reloaded on change.
    Dir(PathBuf),
}

/// The outcome of one [`RulesHolder::poll`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reload {
    /// Nothing changed on disk.
    Unchanged,
    /// A new set loaded and is now in force.
    Reloaded,
    /// The changed files did not load; the last good set stays in force. The message lists
    /// every load error, one per line.
    Refused(String),
}

#[derive(Debug, Default)]
struct State {
    fingerprint: Vec<(PathBuf, u64, Option<SystemTime>)>,
    last_error: Option<String>,
}

/// The rule set in force and the reload state.
#[derive(Debug)]
pub struct RulesHolder {
    source: RulesSource,
    current: RwLock<Arc<RuleSet>>,
    state: RwLock<State>,
}

/// Every load error of a refused set, one per line.
fn describe(errors: &nvcre_engine::LoadErrors) -> String {
    errors
        .errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

impl RulesHolder {
    /// Loads the initial set from `source`.
    ///
    /// # Errors
    /// Every load error, one per line: the controller does not start without a good set.
    pub fn load(source: RulesSource) -> Result<RulesHolder, String> {
        let dir = match &source {
            RulesSource::BuiltIn => None,
            RulesSource::Dir(d) => Some(d.as_path()),
        };
        let fingerprint = dir.map(fingerprint).unwrap_or_default();
        let set = match dir {
            Some(d) => nvcre_domain::load_complete_rules(d),
            None => nvcre_domain::load_rules(None),
        }
        .map_err(|e| describe(&e))?;
        Ok(RulesHolder {
            source,
            current: RwLock::new(Arc::new(set)),
            state: RwLock::new(State {
                fingerprint,
                last_error: None,
            }),
        })
    }

    /// The set in force.
    pub fn current(&self) -> Arc<RuleSet> {
        match self.current.read() {
            Ok(g) => Arc::clone(&g),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    /// Why the last changed set was refused, while that set is still on disk.
    pub fn last_error(&self) -> Option<String> {
        match self.state.read() {
            Ok(s) => s.last_error.clone(),
            Err(p) => p.into_inner().last_error.clone(),
        }
    }

    /// Checks the directory and reloads when it changed. Built-in rules never change.
    pub fn poll(&self) -> Reload {
        let RulesSource::Dir(dir) = &self.source else {
            return Reload::Unchanged;
        };
        let now = fingerprint(dir);
        let mut state = match self.state.write() {
            Ok(s) => s,
            Err(p) => p.into_inner(),
        };
        if now == state.fingerprint {
            return Reload::Unchanged;
        }
        state.fingerprint = now;
        match nvcre_domain::load_complete_rules(dir) {
            Ok(set) => {
                match self.current.write() {
                    Ok(mut g) => *g = Arc::new(set),
                    Err(p) => *p.into_inner() = Arc::new(set),
                }
                state.last_error = None;
                Reload::Reloaded
            }
            Err(e) => {
                let message = describe(&e);
                state.last_error = Some(message.clone());
                Reload::Refused(message)
            }
        }
    }
}

/// Path, size and modification time of every entry below `dir` (symlinks followed), sorted,
/// plus the `..data` symlink target.
fn fingerprint(dir: &Path) -> Vec<(PathBuf, u64, Option<SystemTime>)> {
    let mut out = Vec::new();
    if let Ok(target) = std::fs::read_link(dir.join("..data")) {
        out.push((target, 0, None));
    }
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            let hidden = e.file_name().to_string_lossy().starts_with('.');
            let Ok(meta) = std::fs::metadata(&path) else {
                continue;
            };
            if meta.is_dir() {
                if !hidden {
                    stack.push(path);
                }
            } else if !hidden {
                out.push((path, meta.len(), meta.modified().ok()));
            }
        }
    }
    out.sort();
    out
}
