//! The library half of the `nvcre-policy` command: the `check` pipeline as the command runs it
//! (reading inputs as document streams, checking them on every core, the reports in every
//! format) and what it shares with the other commands (input reading, colour, the rule set's
//! identity, stderr lines). The binary (`src/main.rs`) parses the command line and calls
//! these; the rule work itself lives in `nvcre-domain` and `nvcre-engine`.
//!
//! Check one input as `nvcre-policy check -o json` does:
//!
//! ```
//! use nvcre_domain::{CheckRequest, default_rules};
//! use nvcre_engine::Severity;
//! use nvcre_policy::check::Checker;
//! use nvcre_policy::report::{self, Format};
//! use nvcre_policy::ruleset::RulesInfo;
//!
//! let rules = default_rules()?;
//! let info = RulesInfo::of(None)?;
//! let req = CheckRequest::default();
//! let mut checker = Checker::new(&rules, &req);
//! checker.input("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n".as_bytes());
//! let checked = checker.finish();
//! let json = report::render(Format::Json, &checked.report(&rules, &info, Severity::Error), false);
//! assert!(json.contains("\"kind\": \"CheckReport\""));
//! assert_eq!(checked.exit_code(Severity::Error), 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod check;
pub mod color;
pub mod findings;
pub mod input;
pub mod report;
pub mod ruleset;
