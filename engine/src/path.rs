//! Field paths in the notation Kubernetes messages use.
//!
//! `spec.jobTemplate.spec.workloadMetadata.labels["kai.scheduler/queue"]`, `spec.containers[0].env`:
//! dotted keys, `[n]` for list indexes, `["key"]` for keys that hold `.`, `/` or other characters.

use std::fmt;

use serde_json::Value;

use crate::error::PathError;
use crate::source::escape_pointer;

/// One step of a [`FieldPath`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Segment {
    /// A mapping key.
    Key(String),
    /// A list index.
    Index(usize),
}

/// A parsed field path. Display gives the Kubernetes notation back.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct FieldPath {
    segments: Vec<Segment>,
}

impl FieldPath {
    /// The empty path (the document root).
    pub fn root() -> FieldPath {
        FieldPath::default()
    }

    /// Builds a path from segments.
    pub fn from_segments(segments: Vec<Segment>) -> FieldPath {
        FieldPath { segments }
    }

    /// The segments, root first.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// Appends a key.
    pub fn key(mut self, k: impl Into<String>) -> FieldPath {
        self.segments.push(Segment::Key(k.into()));
        self
    }

    /// Appends an index.
    pub fn index(mut self, i: usize) -> FieldPath {
        self.segments.push(Segment::Index(i));
        self
    }

    /// Appends `segment` in place (a walk over a document goes down with this and back up with
    /// [`FieldPath::pop`] instead of copying the path at every node).
    pub fn push(&mut self, segment: Segment) {
        self.segments.push(segment);
    }

    /// Removes the last segment, if any.
    pub fn pop(&mut self) -> Option<Segment> {
        self.segments.pop()
    }

    /// The RFC 6901 JSON Pointer of this path (`""` for the root).
    pub fn pointer(&self) -> String {
        let mut out = String::new();
        for s in &self.segments {
            out.push('/');
            match s {
                Segment::Key(k) => out.push_str(&escape_pointer(k)),
                Segment::Index(i) => out.push_str(&i.to_string()),
            }
        }
        out
    }

    /// Parses `a.b["c/d"][0].e`. A leading `.` is allowed (`.spec.x`), as in CRD rule fieldPaths.
    ///
    /// # Errors
    /// [`PathError`] naming the offending text.
    pub fn parse(text: &str) -> Result<FieldPath, PathError> {
        FieldPath::parse_text(text).map_err(|message| PathError { message })
    }

    fn parse_text(text: &str) -> Result<FieldPath, String> {
        let chars: Vec<char> = text.chars().collect();
        let mut segments = Vec::new();
        let mut i = 0usize;
        let mut expect_key = true;
        while i < chars.len() {
            match chars.get(i).copied() {
                Some('.') => {
                    i += 1;
                    expect_key = true;
                }
                Some('[') => {
                    i += 1;
                    match chars.get(i).copied() {
                        Some(q @ ('"' | '\'')) => {
                            i += 1;
                            let mut key = String::new();
                            loop {
                                match chars.get(i).copied() {
                                    None => return Err(format!("unterminated key in {text:?}")),
                                    Some('\\') => {
                                        if let Some(c) = chars.get(i + 1) {
                                            key.push(*c);
                                        }
                                        i += 2;
                                    }
                                    Some(c) if c == q => {
                                        i += 1;
                                        break;
                                    }
                                    Some(c) => {
                                        key.push(c);
                                        i += 1;
                                    }
                                }
                            }
                            segments.push(Segment::Key(key));
                        }
                        _ => {
                            let start = i;
                            while chars.get(i).is_some_and(char::is_ascii_digit) {
                                i += 1;
                            }
                            let digits: String =
                                chars.get(start..i).unwrap_or(&[]).iter().collect();
                            let n = digits
                                .parse::<usize>()
                                .map_err(|_| format!("bad index at {start} in {text:?}"))?;
                            segments.push(Segment::Index(n));
                        }
                    }
                    if chars.get(i) != Some(&']') {
                        return Err(format!("expected ']' at {i} in {text:?}"));
                    }
                    i += 1;
                    expect_key = false;
                }
                Some(_) => {
                    if !expect_key {
                        return Err(format!("expected '.' or '[' at {i} in {text:?}"));
                    }
                    let start = i;
                    while chars.get(i).is_some_and(|c| *c != '.' && *c != '[') {
                        i += 1;
                    }
                    let key: String = chars.get(start..i).unwrap_or(&[]).iter().collect();
                    segments.push(Segment::Key(key));
                    expect_key = false;
                }
                None => break,
            }
        }
        Ok(FieldPath { segments })
    }

    /// The value at this path in `doc`, if present.
    pub fn get<'a>(&self, doc: &'a Value) -> Option<&'a Value> {
        let mut cur = doc;
        for s in &self.segments {
            cur = match s {
                Segment::Key(k) => cur.as_object()?.get(k)?,
                Segment::Index(i) => cur.as_array()?.get(*i)?,
            };
        }
        Some(cur)
    }
}

fn is_plain_key(k: &str) -> bool {
    !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (n, s) in self.segments.iter().enumerate() {
            match s {
                Segment::Key(k) if is_plain_key(k) => {
                    if n > 0 {
                        f.write_str(".")?;
                    }
                    f.write_str(k)?;
                }
                Segment::Key(k) => write!(f, "[{}]", serde_json::Value::String(k.clone()))?,
                Segment::Index(i) => write!(f, "[{i}]")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_kubernetes_notation() {
        for text in [
            "spec.jobTemplate.spec.workloadMetadata.labels[\"kai.scheduler/queue\"]",
            "spec.containers[0].env[3].name",
            "spec.gangScheduler.queue",
        ] {
            let p = FieldPath::parse(text).expect("parses");
            assert_eq!(p.to_string(), text);
        }
    }

    #[test]
    fn pointer_escapes_slash_and_tilde() {
        let p = FieldPath::parse("a[\"b/c~d\"][2]").expect("parses");
        assert_eq!(p.pointer(), "/a/b~1c~0d/2");
    }

    #[test]
    fn leading_dot_and_errors() {
        assert_eq!(
            FieldPath::parse(".spec.x").expect("parses").to_string(),
            "spec.x"
        );
        assert!(FieldPath::parse("a[\"b").is_err());
        assert!(FieldPath::parse("a[x]").is_err());
    }
}
