//! Trial renders: proof that a loaded rule set can serve before it is put in force.
//!
//! A rule set can load cleanly and still fail every render: a `gpu-defaults` table without its
//! unknown-architecture row, a `gpu-products` table that maps no `--gpu-arch` value, a template
//! that no longer renders. [`trial_render`] renders a small built-in WorkloadRun of every
//! framework for every node context the set itself names, and refuses the set with the first
//! failure. The probe holds no policy: a name, an image, one node and a command, nothing a rule
//! set could decide differently; the node contexts come from the set's own tables.
//!
//! A policy verdict on the probe (a rejection by a rule, a placement shortfall) is no failure:
//! a set may refuse such a run. A rule that cannot be evaluated on it, a table row that is
//! missing or malformed, an override or template that does not apply, is.

use std::sync::Arc;

use nvcre_engine::{Document, Error, Inside, RuleSet, Severity, Source};
use serde_json::{Value, json};

use crate::detect::{self, DEFAULTS_TABLE, GPU_PRODUCTS_TABLE};
use crate::error::PolicyError;
use crate::nodes::{GPU_PRESENT_LABEL, Node};
use crate::render::{RenderRequest, parse_typed, prepare_document};

/// The frameworks of the probe, each a minimal spec the CRD accepts.
const FRAMEWORKS: [(&str, &str); 3] = [
    ("torch", r#"{"torch": {"script": "/trial.py"}}"#),
    (
        "mpi",
        r#"{"mpi": {"binary": "/trial", "mpirunPath": "/usr/bin/mpirun"}}"#,
    ),
    ("exec", r#"{"exec": {"command": ["/trial"]}}"#),
];

/// One trial: the framework and the node context.
struct Trial<'a> {
    framework: &'a str,
    /// `--platform`, when the trial forces one.
    platform: Option<&'a str>,
    /// `--gpu-arch`, when the trial forces one.
    gpu_arch: Option<&'a str>,
    /// One bare GPU node (no product label, no provider id) instead of flags: the platform
    /// detection's catch-all row and the unknown architecture, as the controller meets them.
    bare_node: bool,
}

impl Trial<'_> {
    fn describe(&self) -> String {
        let context = if self.bare_node {
            "one GPU node without a product label or provider id".to_string()
        } else {
            format!(
                "platform {}, GPU architecture {}",
                self.platform.unwrap_or("(none)"),
                self.gpu_arch.unwrap_or("(unknown)")
            )
        };
        format!(
            "a trial render of a {} WorkloadRun ({context})",
            self.framework
        )
    }
}

/// The probe WorkloadRun of `framework_spec` (JSON of `spec.framework`).
fn probe(framework: &str, framework_spec: &str) -> Result<Document, Error> {
    let text = format!(
        r#"{{"apiVersion": "{}", "kind": "WorkloadRun", "metadata": {{"name": "trial-{framework}"}}, "spec": {{"image": "trial", "numNodes": 1, "framework": {framework_spec}}}}}"#,
        crate::api::API_VERSION
    );
    let source = Source::new(format!("<trial {framework} WorkloadRun>"), text);
    nvcre_engine::parse_documents(&source)?
        .into_iter()
        .next()
        .ok_or_else(|| Error::Serialize("the trial WorkloadRun has no document".into()))
}

/// The one node of the bare-node trial: a GPU node and nothing else.
fn bare_node() -> Result<Arc<Vec<Node>>, Error> {
    let doc = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "trial-node", "labels": {GPU_PRESENT_LABEL: "true"}},
    });
    crate::nodes::nodes_from_documents(&[doc])
        .map(Arc::new)
        .map_err(|e| Error::Serialize(e.to_string()))
}

/// Proves `rules` can serve: every `--gpu-arch` value the `gpu-defaults` table makes
/// selectable is mapped by a `gpu-products` row, and a probe WorkloadRun of every framework
/// renders on one bare GPU node, and with flags: with neither flag, with each architecture
/// `--gpu-arch` accepts, with each platform `--platform` accepts, and with each platform and
/// architecture a `gpu-defaults` row pairs. `place` names the set (its directory) for an error
/// no rule file holds.
///
/// # Errors
/// The first failure, as an [`Error::Pack`] at the rule file (and table entry or rule) it
/// points at, its message naming the trial.
pub fn trial_render(rules: &RuleSet, place: &str) -> Result<(), Error> {
    let to_error = |e: PolicyError, what: Option<&str>| located(rules, place, e, what);
    let architectures = selectable_named(rules).map_err(|e| to_error(e, None))?;
    let platforms: Vec<String> = detect::selectable_platforms(rules)
        .map_err(|e| to_error(e, None))?
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    let nodes = bare_node()?;
    // The node contexts, linear in the tables rather than their product (each render costs
    // about a millisecond): none (the controller's render when no node is targeted), each
    // architecture alone, each platform alone, and each platform row of `gpu-defaults`.
    let mut contexts: Vec<(Option<&str>, Option<&str>)> = vec![(None, None)];
    contexts.extend(architectures.iter().map(|a| (None, Some(a.as_str()))));
    contexts.extend(platforms.iter().map(|p| (Some(p.as_str()), None)));
    let pairs = platform_rows(rules);
    contexts.extend(
        pairs
            .iter()
            .filter(|(p, a)| platforms.contains(p) && architectures.contains(a))
            .map(|(p, a)| (Some(p.as_str()), Some(a.as_str()))),
    );
    for (framework, spec) in FRAMEWORKS {
        let doc = probe(framework, spec)?;
        let mut trials = vec![Trial {
            framework,
            platform: None,
            gpu_arch: None,
            bare_node: true,
        }];
        trials.extend(contexts.iter().map(|&(platform, gpu_arch)| Trial {
            framework,
            platform,
            gpu_arch,
            bare_node: false,
        }));
        for trial in &trials {
            let req = RenderRequest {
                platform: trial.platform.map(str::to_string),
                gpu_arch: trial.gpu_arch.map(str::to_string),
                allow_unknown_arch: true,
                nodes: trial.bare_node.then(|| Arc::clone(&nodes)),
                ..RenderRequest::default()
            };
            if let Err(e) = render(rules, &doc, &req) {
                return Err(to_error(e, Some(&trial.describe())));
            }
        }
    }
    Ok(())
}

/// A failure of [`trial_render`] as the `cannot-render` lint (an error), at the place it names.
pub fn cannot_render_lint(e: Error) -> nvcre_engine::LintFinding {
    nvcre_engine::lint_finding_from_error(nvcre_engine::Lint::CannotRender, e)
}

/// One trial render. The admission stage runs on its own and its verdict is set aside, so that
/// a set whose admission refuses the probe still has every later stage and table tried.
///
/// # Errors
/// A failure of the set (see the module documentation); a policy verdict is `Ok`.
fn render(rules: &RuleSet, doc: &Document, req: &RenderRequest) -> Result<(), PolicyError> {
    let (doc, _) = prepare_document(doc, "WorkloadRun")?;
    let run = parse_typed(&doc, "WorkloadRun")?;
    let admission = crate::contract::run_stage(
        rules,
        crate::contract::ADMISSION,
        std::borrow::Cow::Borrowed(&doc.value),
        nvcre_engine::Origin {
            file: &doc.source.name,
            document: doc.index,
            spans: Some(&doc.spans),
        },
        &Value::Null,
    )?;
    rule_errors(admission.findings)?;
    let admitted = RenderRequest {
        admitted: true,
        ..req.clone()
    };
    match crate::render::render_admitted_run(rules, &doc, run, &admitted) {
        Ok(_) => Ok(()),
        Err(e) => match e.into_parts().0 {
            PolicyError::Rejected(findings) => rule_errors(findings),
            PolicyError::Placement(_) => Ok(()),
            other => Err(other),
        },
    }
}

/// A rejection is a verdict unless a rule that rejects could not be evaluated (a rule error):
/// that rule would reject every such run.
fn rule_errors(findings: Vec<nvcre_engine::Finding>) -> Result<(), PolicyError> {
    if findings
        .iter()
        .any(|f| f.rule_error && f.severity == Severity::Error)
    {
        let errors = findings
            .into_iter()
            .filter(|f| f.rule_error && f.severity == Severity::Error)
            .collect();
        return Err(PolicyError::Rejected(errors));
    }
    Ok(())
}

/// The architectures `--gpu-arch` accepts that the `gpu-products` table maps to themselves
/// (one it reads as another name is unreachable, and `rules lint` warns of it: `never-matches`).
///
/// # Errors
/// A selectable architecture that no `gpu-products` row maps at all (the table lost its rows):
/// `--gpu-arch` is then refused for it, and every node's product reads as the unknown
/// architecture.
fn selectable_named(rules: &RuleSet) -> Result<Vec<String>, PolicyError> {
    let products = detect::gpu_products(rules)?;
    let Some(table) = rules.table(GPU_PRODUCTS_TABLE) else {
        return Err(PolicyError::MissingTable(GPU_PRODUCTS_TABLE.to_string()));
    };
    let mut named = Vec::new();
    for arch in detect::selectable_architectures(rules)? {
        let mapped = products.architecture(&arch);
        if mapped.is_empty() {
            let row = defaults_row_id(rules, &arch).unwrap_or_default();
            return Err(PolicyError::TableEntry {
                location: table.source.name.clone(),
                table: GPU_PRODUCTS_TABLE.to_string(),
                entry: String::new(),
                message: format!(
                    "no row maps the GPU architecture {}, which table {DEFAULTS_TABLE} makes selectable (entry {row}), so --gpu-arch {arch} would be refused and every node's product would read as an unknown architecture; add a row that maps it to itself",
                    detect::quote(&arch),
                ),
            });
        }
        if mapped == arch {
            named.push(arch);
        }
    }
    Ok(named)
}

/// The (platform, architecture) pairs of the `gpu-defaults` rows that adjust a platform.
fn platform_rows(rules: &RuleSet) -> Vec<(String, String)> {
    let rows = rules
        .table(DEFAULTS_TABLE)
        .and_then(|t| t.render(&Value::Null).ok())
        .unwrap_or_default();
    rows.into_iter()
        .filter_map(|(_, v)| {
            let platform = v.get("platform").and_then(Value::as_str)?;
            let arch = v.get("gpuArchitecture").and_then(Value::as_str)?;
            Some((platform.to_string(), arch.to_string()))
        })
        .collect()
}

/// The id of the selectable row of `arch` without a platform in `gpu-defaults`.
fn defaults_row_id(rules: &RuleSet, arch: &str) -> Option<String> {
    let table = rules.table(DEFAULTS_TABLE)?;
    let rows = table.render(&Value::Null).ok()?;
    rows.into_iter()
        .find(|(_, v)| {
            v.get("gpuArchitecture").and_then(Value::as_str) == Some(arch)
                && v.get("platform").is_none_or(Value::is_null)
                && v.get("selectable").and_then(Value::as_bool) == Some(true)
        })
        .map(|(id, _)| id)
}

/// `e`, met by `what` (a trial render), as a rule file's error: at the table entry, the table,
/// the rule or the rule file it names, else at `place`.
fn located(rules: &RuleSet, place: &str, e: PolicyError, what: Option<&str>) -> Error {
    let (e, _, _) = e.into_parts();
    let lead = match what {
        Some(w) => format!("the set cannot serve: {w} fails: "),
        None => "the set cannot serve: ".to_string(),
    };
    let table_place = |name: &str| {
        rules.table(name).map(|t| {
            let empty = if t.entries.is_empty() {
                " (the table has no rows)"
            } else {
                ""
            };
            (t.source.name.clone(), empty)
        })
    };
    match e {
        PolicyError::TableEntry {
            table,
            entry,
            message,
            ..
        } => {
            let (file, empty) = table_place(&table).unwrap_or((place.to_string(), ""));
            let pos = rules
                .table(&table)
                .and_then(|t| t.entries.iter().find(|r| r.id == entry).map(|r| r.pos));
            Error::Pack {
                file,
                pos,
                rule: (!entry.is_empty()).then_some(Inside::Entry(entry)),
                message: format!("{lead}table {table}: {message}{empty}"),
            }
        }
        PolicyError::NoMatchingRow { ref table, .. } | PolicyError::MissingTable(ref table) => {
            let (file, empty) = table_place(table).unwrap_or((place.to_string(), ""));
            Error::Pack {
                file,
                pos: None,
                rule: None,
                message: format!("{lead}{e}{empty}"),
            }
        }
        PolicyError::Rejected(findings) => {
            let first = findings.into_iter().next();
            match first {
                Some(f) => Error::Pack {
                    file: f.rule_file.clone(),
                    pos: Some(nvcre_engine::Pos {
                        line: f.rule_line,
                        column: 1,
                    }),
                    rule: Some(Inside::Rule(f.rule_id.clone())),
                    message: format!("{lead}{}", f.message),
                },
                None => Error::Pack {
                    file: place.to_string(),
                    pos: None,
                    rule: None,
                    message: format!("{lead}a rule error"),
                },
            }
        }
        PolicyError::Engine(Error::Pack {
            file,
            pos,
            rule,
            message,
        })
        | PolicyError::Engine(Error::Contract {
            file,
            pos,
            rule,
            message,
            ..
        }) => Error::Pack {
            file,
            pos,
            rule,
            message: format!("{lead}{message}"),
        },
        other => Error::Pack {
            file: place.to_string(),
            pos: None,
            rule: None,
            message: format!("{lead}{other}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shipped rule directory copied to a temporary one, `edit` applied to each file's
    /// text (by its path below `rules/`), loaded as a controller loads a set.
    fn load_edited(edit: impl Fn(&str, &mut String)) -> Result<RuleSet, String> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../rules");
        let tmp = tempfile::tempdir().expect("tempdir");
        for dir in [
            "admission",
            "contract",
            "defaults",
            "detect",
            "lint",
            "measure",
            "overrides",
        ] {
            std::fs::create_dir(tmp.path().join(dir)).expect("mkdir");
            for f in std::fs::read_dir(root.join(dir))
                .expect("read_dir")
                .flatten()
            {
                let name = format!("{dir}/{}", f.file_name().to_string_lossy());
                let mut text = std::fs::read_to_string(f.path()).expect("read");
                edit(&name, &mut text);
                std::fs::write(tmp.path().join(&name), text).expect("write");
            }
        }
        crate::packs::load_complete_rules(tmp.path()).map_err(|e| {
            let dir = tmp.path().display().to_string();
            e.errors
                .iter()
                .map(|e| e.to_string().replace(&dir, "DIR"))
                .collect::<Vec<_>>()
                .join("\n")
        })
    }

    /// The text of a table file up to its `entries:`, with `entries: []`.
    fn emptied(text: &mut String) {
        let at = text.find("entries:").expect("entries");
        text.truncate(at);
        text.push_str("entries: []\n");
    }

    #[test]
    fn the_embedded_set_serves() {
        let rules = crate::packs::load_rules(None).expect("the embedded set loads");
        assert_eq!(
            trial_render(&rules, "rules").map_err(|e| e.to_string()),
            Ok(())
        );
    }

    /// The rule ids of `rules`, as `pack/id`, in load order.
    fn rule_ids(rules: &RuleSet) -> Vec<String> {
        rules
            .rules()
            .map(|(p, r)| format!("{}/{}", p.name, r.id))
            .collect()
    }

    #[test]
    fn the_shipped_directory_loads_whole() {
        let loaded = load_edited(|_, _| {}).expect("the shipped directory loads");
        let embedded = crate::packs::load_rules(None).expect("the embedded set loads");
        assert_eq!(rule_ids(&loaded), rule_ids(&embedded));
    }

    #[test]
    fn a_gpu_defaults_table_emptied_of_rows_is_refused() {
        let err = load_edited(|name, text| {
            if name == "defaults/gpu-defaults.yaml" {
                emptied(text);
            }
        })
        .map(|_| ())
        .expect_err("refused");
        assert_eq!(
            err,
            "rule pack error: DIR/defaults/gpu-defaults.yaml: entry unknown: the set cannot serve: a trial render of a torch WorkloadRun (one GPU node without a product label or provider id) fails: table gpu-defaults: no row for an unknown architecture (gpuArchitecture: \"\") (the table has no rows)"
        );
    }

    #[test]
    fn a_gpu_defaults_table_without_its_unknown_row_is_refused() {
        let err = load_edited(|name, text| {
            if name == "defaults/gpu-defaults.yaml" {
                *text = text
                    .lines()
                    .filter(|l| !l.contains("id: h100") && !l.contains("id: unknown"))
                    .map(|l| format!("{l}\n"))
                    .collect();
            }
        })
        .map(|_| ())
        .expect_err("refused");
        assert_eq!(
            err,
            "rule pack error: DIR/defaults/gpu-defaults.yaml: entry unknown: the set cannot serve: a trial render of a torch WorkloadRun (one GPU node without a product label or provider id) fails: table gpu-defaults: no row for an unknown architecture (gpuArchitecture: \"\")"
        );
    }

    #[test]
    fn a_gpu_products_table_emptied_of_rows_is_refused() {
        let err = load_edited(|name, text| {
            if name == "defaults/gpu-products.yaml" {
                emptied(text);
            }
        })
        .map(|_| ())
        .expect_err("refused");
        assert_eq!(
            err,
            "rule pack error: DIR/defaults/gpu-products.yaml: the set cannot serve: table gpu-products: no row maps the GPU architecture \"a100\", which table gpu-defaults makes selectable (entry a100), so --gpu-arch a100 would be refused and every node's product would read as an unknown architecture; add a row that maps it to itself (the table has no rows)"
        );
    }

    #[test]
    fn an_admission_that_rejects_the_probe_is_a_verdict_not_a_failure() {
        let rules = load_edited(|name, text| {
            if name == "admission/workloadrun.yaml" {
                *text = text.replacen(
                    "rules:\n",
                    "rules:\n  - id: trial-no-runs\n    validate: {expression: 'false', message: no runs today}\n",
                    1,
                );
            }
        });
        let rules = rules.expect("a verdict on the probe does not refuse the set");
        assert!(
            rule_ids(&rules).contains(&"workloadrun-admission/trial-no-runs".to_string()),
            "{:?}",
            rule_ids(&rules)
        );
    }

    #[test]
    fn a_rule_that_cannot_be_evaluated_on_any_run_is_refused() {
        let err = load_edited(|name, text| {
            if name == "admission/workloadrun.yaml" {
                *text = text.replacen(
                    "rules:\n",
                    "rules:\n  - id: trial-broken\n    validate: {expression: 'object.spec.nothing == 1', message: broken}\n",
                    1,
                );
            }
        })
        .map(|_| ())
        .expect_err("refused");
        assert_eq!(
            err,
            "rule pack error: DIR/admission/workloadrun.yaml:29:1: rule trial-broken: the set cannot serve: a trial render of a torch WorkloadRun (one GPU node without a product label or provider id) fails: rule trial-broken could not be evaluated on document 1: No such key: nothing (expression: object.spec.nothing == 1) (a rule error, not a policy violation)"
        );
    }
}
