//! LogProfiles compiled from rule data: every regex read as Go reads it, named groups and units
//! checked, every `example` matched, the timestamp layout translated. The
//! same compile runs when a rule set loads (a bad profile refuses the set, with file, line and
//! column) and when a measurement asks for a profile.

use std::borrow::Cow;
use std::collections::BTreeMap;

use nvcre_engine::go_regex::{self, go_utf8};
use nvcre_engine::{Document, DocumentProblem, RuleSet};
use regex::bytes::{CaptureLocations, Regex};
use serde_json::Value;

use super::api::{EventPattern, LogProfileSpec};
use super::golayout::GoLayout;

/// The `kind` of LogProfile documents (rule files and cluster objects alike).
pub const LOG_PROFILE_KIND: &str = "LogProfile";

/// The patterns of a LogProfile, in the order they are compiled and checked (the first problem
/// of each pattern is reported).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PatternName {
    /// `trainingStep`.
    TrainingStep,
    /// `checkpointSave`.
    CheckpointSave,
    /// `checkpointDone`.
    CheckpointDone,
    /// `checkpointRestore`.
    CheckpointRestore,
    /// `checkpointLoaded`.
    CheckpointLoaded,
    /// `applicationStart`.
    ApplicationStart,
    /// `warmupStep`.
    WarmupStep,
    /// `bandwidthResult`.
    BandwidthResult,
    /// `networkTransport`.
    NetworkTransport,
}

impl PatternName {
    /// Every pattern, in compile order.
    pub const ALL: [PatternName; 9] = [
        PatternName::TrainingStep,
        PatternName::CheckpointSave,
        PatternName::CheckpointDone,
        PatternName::CheckpointRestore,
        PatternName::CheckpointLoaded,
        PatternName::ApplicationStart,
        PatternName::WarmupStep,
        PatternName::BandwidthResult,
        PatternName::NetworkTransport,
    ];

    /// The field name under `spec.patterns`.
    pub fn as_str(self) -> &'static str {
        match self {
            PatternName::TrainingStep => "trainingStep",
            PatternName::CheckpointSave => "checkpointSave",
            PatternName::CheckpointDone => "checkpointDone",
            PatternName::CheckpointRestore => "checkpointRestore",
            PatternName::CheckpointLoaded => "checkpointLoaded",
            PatternName::ApplicationStart => "applicationStart",
            PatternName::WarmupStep => "warmupStep",
            PatternName::BandwidthResult => "bandwidthResult",
            PatternName::NetworkTransport => "networkTransport",
        }
    }

    /// The named groups the measurements read from this pattern.
    pub fn groups(self) -> &'static [&'static str] {
        match self {
            PatternName::TrainingStep => &[
                "timestamp",
                "globalStep",
                "iteration",
                "epoch",
                "stepTiming",
                "loss",
                "tflops",
                "elapsedTime",
            ],
            PatternName::CheckpointSave => &["timestamp", "step", "path", "saveDuration"],
            PatternName::CheckpointDone
            | PatternName::CheckpointRestore
            | PatternName::CheckpointLoaded => &["timestamp", "step", "path"],
            PatternName::ApplicationStart => &["timestamp"],
            PatternName::WarmupStep => &[],
            PatternName::BandwidthResult => &["size", "algBW", "busBW"],
            PatternName::NetworkTransport => &["transport"],
        }
    }

    fn get(self, spec: &LogProfileSpec) -> Option<&EventPattern> {
        let p = &spec.patterns;
        match self {
            PatternName::TrainingStep => p.training_step.as_ref(),
            PatternName::CheckpointSave => p.checkpoint_save.as_ref(),
            PatternName::CheckpointDone => p.checkpoint_done.as_ref(),
            PatternName::CheckpointRestore => p.checkpoint_restore.as_ref(),
            PatternName::CheckpointLoaded => p.checkpoint_loaded.as_ref(),
            PatternName::ApplicationStart => p.application_start.as_ref(),
            PatternName::WarmupStep => p.warmup_step.as_ref(),
            PatternName::BandwidthResult => p.bandwidth_result.as_ref(),
            PatternName::NetworkTransport => p.network_transport.as_ref(),
        }
    }
}

/// The captures that hold durations, and so may have a unit.
const DURATION_GROUPS: &[&str] = &["stepTiming", "elapsedTime", "saveDuration"];

/// A duration unit of [`EventPattern::units`]: the factor to seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Unit(f64);

impl Unit {
    fn parse(s: &str) -> Option<Unit> {
        match s {
            "s" => Some(Unit(1.0)),
            "ms" => Some(Unit(1e-3)),
            "us" => Some(Unit(1e-6)),
            _ => None,
        }
    }
}

/// One compiled pattern.
#[derive(Debug, Clone)]
pub struct CompiledPattern {
    regex: Regex,
    units: BTreeMap<String, Unit>,
}

impl CompiledPattern {
    /// The captures of the first match in `line`, read as Go reads it (each byte that is not
    /// part of valid UTF-8 is U+FFFD). A caller matching one line against several patterns
    /// reads it once with [`GoLine::new`] and calls [`CompiledPattern::captures_in`].
    pub fn captures<'a>(&'a self, line: &'a [u8]) -> Option<LineCaptures<'a>> {
        self.captures_text(go_utf8(line))
    }

    /// The captures of the first match in `line`.
    pub fn captures_in<'a>(&'a self, line: &'a GoLine<'_>) -> Option<LineCaptures<'a>> {
        self.captures_text(Cow::Borrowed(&line.0))
    }

    fn captures_text<'a>(&'a self, text: Cow<'a, [u8]>) -> Option<LineCaptures<'a>> {
        let mut locs = self.regex.capture_locations();
        self.regex.captures_read(&mut locs, &text)?;
        Some(LineCaptures {
            text,
            locs,
            regex: &self.regex,
        })
    }

    /// True when the regex matches `line` (read as Go reads it).
    pub fn is_match(&self, line: &[u8]) -> bool {
        self.regex.is_match(&go_utf8(line))
    }

    /// True when the regex matches `line`.
    pub fn is_match_in(&self, line: &GoLine<'_>) -> bool {
        self.regex.is_match(&line.0)
    }

    /// `value` (a duration capture named `group`) in seconds, per the pattern's `units`
    /// (seconds when not listed).
    pub fn seconds(&self, group: &str, value: f64) -> f64 {
        self.units.get(group).map_or(value, |u| value * u.0)
    }
}

/// A log line as Go's regexp reads it: the line itself when it is valid UTF-8, else a copy
/// with each byte that is not part of valid UTF-8 replaced by U+FFFD
/// ([`nvcre_engine::go_regex::go_utf8`]). Read once, matched by every pattern.
#[derive(Debug, Clone)]
pub struct GoLine<'a>(Cow<'a, [u8]>);

impl<'a> GoLine<'a> {
    /// `line` as Go reads it.
    pub fn new(line: &'a [u8]) -> GoLine<'a> {
        GoLine(go_utf8(line))
    }
}

/// The groups of one match of a [`CompiledPattern`] on a line.
#[derive(Debug)]
pub struct LineCaptures<'a> {
    /// The line as matched (valid UTF-8).
    text: Cow<'a, [u8]>,
    locs: CaptureLocations,
    regex: &'a Regex,
}

impl LineCaptures<'_> {
    /// What group `name` matched, when it took part in the match (the first group of that
    /// name, as Go's `SubexpIndex` finds).
    pub fn name(&self, name: &str) -> Option<&[u8]> {
        let i = self.regex.capture_names().position(|n| n == Some(name))?;
        let (start, end) = self.locs.get(i)?;
        self.text.get(start..end)
    }
}

/// The text of capture `name` (trimmed), when it took part in the match.
pub fn capture<'c>(caps: &'c LineCaptures<'_>, name: &str) -> Option<Cow<'c, str>> {
    caps.name(name).map(|m| match String::from_utf8_lossy(m) {
        Cow::Borrowed(s) => Cow::Borrowed(s.trim()),
        Cow::Owned(s) => Cow::Owned(s.trim().to_string()),
    })
}

/// A LogProfile ready to parse lines.
#[derive(Debug, Clone)]
pub struct CompiledProfile {
    /// `metadata.name`.
    pub name: String,
    /// The spec as written.
    pub spec: LogProfileSpec,
    /// The `timestamp` layout.
    pub layout: GoLayout,
    patterns: BTreeMap<PatternName, CompiledPattern>,
}

/// One problem of a LogProfile: the field path under the document (`spec.patterns.…`) and the
/// message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileProblem {
    /// Dotted path of the offending field, from the document root.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl CompiledProfile {
    /// Compiles `spec` of the profile `name`.
    ///
    /// # Errors
    /// Every problem, each at its field (paths start at `spec.`): a layout the translation does
    /// not support; per pattern, in [`PatternName::ALL`] order, the first of: a regex that does
    /// not compile (`pattern trainingStep: invalid regex: error parsing regexp: …`;
    /// `compiling bandwidthResult regex: …`), an `example` the regex does not match, a
    /// missing group
    /// (`bandwidthResult regex must have named groups: size, algBW, busBW`,
    /// `networkTransport regex must have named group: transport`, a trainingStep without
    /// `globalStep` or `iteration`), a named group the measurements do not read, a unit
    /// that is not `s`, `ms` or `us` or is set on a capture that is not a duration.
    pub fn compile(
        name: &str,
        spec: &LogProfileSpec,
    ) -> Result<CompiledProfile, Vec<ProfileProblem>> {
        let mut problems = schema_problems(spec);
        let layout = GoLayout::compile(&spec.timestamp.layout).map_err(|message| ProfileProblem {
            path: "spec.timestamp.layout".to_string(),
            message,
        });
        let mut patterns = BTreeMap::new();
        for which in PatternName::ALL {
            let Some(p) = which.get(spec) else { continue };
            if p.regex.is_empty() {
                // Refused by the schema above.
                continue;
            }
            match compile_pattern(which, p) {
                Ok(c) => {
                    patterns.insert(which, c);
                }
                Err((field, message)) => problems.push(ProfileProblem {
                    path: format!("spec.patterns.{}.{field}", which.as_str()),
                    message,
                }),
            }
        }
        match layout {
            Ok(layout) if problems.is_empty() => Ok(CompiledProfile {
                name: name.to_string(),
                spec: spec.clone(),
                layout,
                patterns,
            }),
            Ok(_) => Err(problems),
            Err(p) => {
                problems.insert(0, p);
                Err(problems)
            }
        }
    }

    /// The compiled pattern `which`, when the profile defines it.
    pub fn pattern(&self, which: PatternName) -> Option<&CompiledPattern> {
        self.patterns.get(&which)
    }
}

/// Compiles a LogProfile regex as Go reads it ([`nvcre_engine::go_regex`]): Go's syntax and
/// errors, ASCII `\d`, `\s`, `\w` and `\b`, Unicode classes and `.` over characters. Matching
/// runs on bytes: match [`nvcre_engine::go_regex::go_utf8`] of a line (as
/// [`CompiledPattern`] does), so a line need not be UTF-8.
///
/// # Errors
/// Go's message: ``error parsing regexp: <what>: `<fragment>` ``.
pub fn go_regex(regex: &str) -> Result<Regex, String> {
    go_regex::compile_bytes(regex).map_err(|e| e.to_string())
}

/// `workerStrategy.type`'s values, as the CRD's enum lists them.
const WORKER_STRATEGY_TYPES: [&str; 2] = ["Single", "Multi"];
/// `workerStrategy.lifecyclePod`'s and `trainingStepPod`'s values, as the CRD's enums list them.
const WORKER_PODS: [&str; 2] = ["first", "last"];

/// What the CustomResourceDefinition's schema refuses beyond the types: an empty regex
/// (`minLength: 1`), a `workerStrategy` value outside its enum, a `warmupSteps` below 0 or a
/// `logInterval` below 1; in the API server's words, each at its field.
fn schema_problems(spec: &LogProfileSpec) -> Vec<ProfileProblem> {
    // The schema's enums and minimums, as the CRD declares them (a test holds the two alike).
    let mut problems = Vec::new();
    let mut push = |path: String, message: String| {
        problems.push(ProfileProblem {
            message: format!("{path}: {message}"),
            path,
        })
    };
    for which in PatternName::ALL {
        if let Some(p) = which.get(spec)
            && p.regex.is_empty()
        {
            let path = format!("spec.patterns.{}.regex", which.as_str());
            push(
                path.clone(),
                format!("Invalid value: \"\": {path} in body should be at least 1 chars long"),
            );
        }
    }
    if let Some(w) = &spec.worker_strategy {
        let fields: [(&str, Option<&str>, &[&str]); 3] = [
            ("type", Some(w.type_.as_str()), &WORKER_STRATEGY_TYPES),
            ("lifecyclePod", w.lifecycle_pod.as_deref(), &WORKER_PODS),
            (
                "trainingStepPod",
                w.training_step_pod.as_deref(),
                &WORKER_PODS,
            ),
        ];
        for (field, value, allowed) in fields {
            if let Some(v) = value
                && !allowed.contains(&v)
            {
                let supported: Vec<String> = allowed.iter().map(|a| format!("{a:?}")).collect();
                push(
                    format!("spec.workerStrategy.{field}"),
                    format!(
                        "Unsupported value: {v:?}: supported values: {}",
                        supported.join(", ")
                    ),
                );
            }
        }
    }
    for (field, value, min) in [
        ("warmupSteps", spec.warmup_steps, 0),
        ("logInterval", spec.log_interval, 1),
    ] {
        if let Some(v) = value
            && v < min
        {
            let path = format!("spec.{field}");
            push(
                path.clone(),
                format!(
                    "Invalid value: {v}: {path} in body should be greater than or equal to {min}"
                ),
            );
        }
    }
    problems
}

fn compile_pattern(
    which: PatternName,
    p: &EventPattern,
) -> Result<CompiledPattern, (String, String)> {
    let name = which.as_str();
    let refused = |e: go_regex::GoRegexError| {
        (
            "regex".to_string(),
            match which {
                PatternName::BandwidthResult | PatternName::NetworkTransport => {
                    format!("compiling {name} regex: {e}")
                }
                _ => format!("pattern {name}: invalid regex: {e}"),
            },
        )
    };
    let translated = go_regex::translate(&p.regex).map_err(refused)?;
    let regex = translated.bytes_regex(&p.regex).map_err(refused)?;
    // The example before the group checks: a regex that misses its own example says so first.
    if let Some(example) = &p.example
        && !regex.is_match(example.as_bytes())
    {
        return Err((
            "example".to_string(),
            format!(
                "pattern {name}: example does not match regex\n  regex:   {}\n  example: {example}",
                p.regex
            ),
        ));
    }
    // The names as Go reads them (a repeated name, or one the regex crate cannot name, is
    // still a named group to Go).
    let groups: Vec<&str> = translated
        .names
        .iter()
        .flatten()
        .map(String::as_str)
        .collect();
    let has = |g: &str| groups.contains(&g);
    match which {
        PatternName::BandwidthResult if !["size", "algBW", "busBW"].iter().all(|g| has(g)) => {
            return Err((
                "regex".to_string(),
                "bandwidthResult regex must have named groups: size, algBW, busBW".to_string(),
            ));
        }
        PatternName::NetworkTransport if !has("transport") => {
            return Err((
                "regex".to_string(),
                "networkTransport regex must have named group: transport".to_string(),
            ));
        }
        PatternName::TrainingStep if !has("globalStep") && !has("iteration") => {
            return Err((
                "regex".to_string(),
                "trainingStep regex must have named group globalStep or iteration".to_string(),
            ));
        }
        _ => {}
    }
    if let Some(unknown) = groups.iter().find(|g| !which.groups().contains(g)) {
        let known = if which.groups().is_empty() {
            "it captures nothing".to_string()
        } else {
            format!("known groups: {}", which.groups().join(", "))
        };
        return Err((
            "regex".to_string(),
            format!("pattern {name}: unknown named group {unknown:?}; {known}"),
        ));
    }
    let mut units = BTreeMap::new();
    for (group, unit) in &p.units {
        if !DURATION_GROUPS.contains(&group.as_str()) {
            return Err((
                format!("units.{group}"),
                format!(
                    "pattern {name}: units.{group}: only duration captures have units ({})",
                    DURATION_GROUPS.join(", ")
                ),
            ));
        }
        let Some(u) = Unit::parse(unit) else {
            return Err((
                format!("units.{group}"),
                format!(
                    "pattern {name}: units.{group}: unknown unit {unit:?}; known units: s, ms, us"
                ),
            ));
        };
        units.insert(group.clone(), u);
    }
    Ok(CompiledPattern { regex, units })
}

/// The load-time check of one LogProfile document (what the rule-set contract runs): the
/// apiVersion, a `metadata.name`, the spec's shape (unknown keys refused) and
/// [`CompiledProfile::compile`]. Messages start with `LogProfile "<name>": `.
pub fn check_document(doc: &Document) -> Vec<DocumentProblem> {
    match profile_from_value(&doc.value) {
        Ok(_) => Vec::new(),
        Err(problems) => problems
            .into_iter()
            .map(|p| DocumentProblem {
                path: p.path,
                message: p.message,
            })
            .collect(),
    }
}

/// A LogProfile object (rule document or cluster object) compiled.
///
/// # Errors
/// As [`check_document`]: each problem with its path and message.
pub fn profile_from_value(value: &Value) -> Result<CompiledProfile, Vec<ProfileProblem>> {
    let name = value
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let prefix = format!("LogProfile {name:?}: ");
    let problem = |path: &str, message: String| ProfileProblem {
        path: path.to_string(),
        message: format!("{prefix}{message}"),
    };
    let api_version = value
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    // The older group is read as ours (`check` warns about it).
    if api_version != crate::api::API_VERSION && api_version != crate::api::LEGACY_API_VERSION {
        return Err(vec![problem(
            "apiVersion",
            format!(
                "apiVersion must be {}, got {api_version:?}",
                crate::api::API_VERSION
            ),
        )]);
    }
    if name.is_empty() {
        return Err(vec![problem(
            "metadata",
            "metadata.name is required".to_string(),
        )]);
    }
    let Some(spec_value) = value.get("spec") else {
        return Err(vec![problem("kind", "spec is required".to_string())]);
    };
    let spec: LogProfileSpec = nvcre_engine::read_mapping(spec_value).map_err(|e| {
        let rel = e.path().to_string();
        let path = if rel == "." {
            "spec".to_string()
        } else {
            format!("spec.{rel}")
        };
        let message = crate::render::plain_serde_message(&e.inner().to_string());
        vec![problem(&path, format!("{path}: {message}"))]
    })?;
    CompiledProfile::compile(name, &spec).map_err(|ps| {
        ps.into_iter()
            .map(|p| ProfileProblem {
                message: format!("{prefix}{}", p.message),
                path: p.path,
            })
            .collect()
    })
}

/// The LogProfiles of a rule set, by name.
#[derive(Debug, Clone, Default)]
pub struct LogProfiles {
    profiles: BTreeMap<String, CompiledProfile>,
}

impl LogProfiles {
    /// Compiles every `LogProfile` document of `rules` (a set loaded with
    /// [`crate::contract`], which checked each already).
    ///
    /// # Errors
    /// The problems of the first profile that does not compile, one per line, which a set
    /// loaded with the contract rules out.
    pub fn from_rules(rules: &RuleSet) -> Result<LogProfiles, String> {
        let mut profiles = BTreeMap::new();
        for doc in rules.documents_of(LOG_PROFILE_KIND) {
            let p = profile_from_value(&doc.value).map_err(|ps| {
                ps.iter()
                    .map(|p| format!("{}: {}", doc.source.name, p.message))
                    .collect::<Vec<_>>()
                    .join("\n")
            })?;
            profiles.insert(p.name.clone(), p);
        }
        Ok(LogProfiles { profiles })
    }

    /// The profile `name`.
    ///
    /// # Errors
    /// `unknown LogProfile "<name>"; known profiles: a, b` (or `; the rule set has none`).
    pub fn get(&self, name: &str) -> Result<&CompiledProfile, String> {
        self.profiles.get(name).ok_or_else(|| {
            if self.profiles.is_empty() {
                format!("unknown LogProfile {name:?}; the rule set has none")
            } else {
                format!(
                    "unknown LogProfile {name:?}; known profiles: {}",
                    self.names().collect::<Vec<_>>().join(", ")
                )
            }
        })
    }

    /// The profile names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.profiles.keys().map(String::as_str)
    }
}

#[cfg(test)]
mod schema_tests {
    use super::*;

    /// The values [`schema_problems`] allows are the ones the CRD's schema declares.
    #[test]
    fn the_checked_values_are_the_schemas() {
        let schema = serde_json::to_value(schemars::schema_for!(LogProfileSpec)).expect("schema");
        let defs = &schema["$defs"]["WorkerStrategySpec"]["properties"];
        let values = |field: &str| -> Vec<String> {
            let p = &defs[field];
            let e = p.get("enum").or_else(|| {
                p["anyOf"]
                    .as_array()
                    .and_then(|a| a.iter().find_map(|s| s.get("enum")))
            });
            serde_json::from_value(e.cloned().unwrap_or_default()).unwrap_or_default()
        };
        assert_eq!(values("type"), WORKER_STRATEGY_TYPES);
        assert_eq!(values("lifecyclePod"), WORKER_PODS);
        assert_eq!(values("trainingStepPod"), WORKER_PODS);
        assert_eq!(schema["properties"]["warmupSteps"]["minimum"], 0);
        assert_eq!(schema["properties"]["logInterval"]["minimum"], 1);
    }
}
