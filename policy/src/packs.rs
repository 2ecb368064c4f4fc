//! The default rule set: the files under `rules/`, embedded in the binary at build time, and
//! the [`Contract`] every rule set is loaded with ([`contract`]).
//!
//! `--rules DIR` (or `NVCRE_RULES`) replaces the whole set; see [`load_rules`].

use std::path::Path;
use std::sync::Arc;

use nvcre_engine::schema::row_schema;
use nvcre_engine::{Contract, Error, LoadErrors, Prepared, PreparedSource, RuleSet, Source};

use crate::api::EnvVar;
use crate::build::{RUNTIME_TEMPLATES_TABLE, RuntimeTemplates};
use crate::contract::{ADMISSION, GANG_CONTRACT, LINT, MANIFESTS, PLACEMENT, WORKLOAD_LABELS};
use crate::detect::{
    DEFAULTS_TABLE, DefaultsRow, NCCL_ENV_TABLE, PLATFORM_TABLE, PlatformRow, SCHEDULING_TABLE,
    SchedulingRow, TEST_SCALE_TABLE, TestScale,
};
use crate::detect::{GANG_DEFAULTS_TABLE, GPU_PRODUCTS_TABLE, GangDefaults, GpuProductRow};
use crate::render::{NIC_TABLE, NicRow, OVERRIDE_TABLE, PlatformOverride};
use crate::resolve::{LIST_MERGE_TABLE, ListMergeRow};

// `EMBEDDED`: every rule file below `rules/`, listed by the build script (`build.rs`);
// `PREPARED`: the documents of each, as the build script parsed them.
include!(concat!(env!("OUT_DIR"), "/embedded_rules.rs"));

/// `sha256:<hex>` of the embedded rule files, computed by the build script: over each file's
/// path below `rules/` and its text, each prefixed with its length in bytes (a big-endian
/// `u64`), in (path, text) order.
pub fn embedded_rules_digest() -> &'static str {
    EMBEDDED_DIGEST
}

/// The embedded rule files, each as a [`Source`] named `rules/<path>`, in path order.
pub fn embedded_sources() -> Vec<Arc<Source>> {
    EMBEDDED
        .iter()
        .map(|(name, text)| Source::from_static(*name, text))
        .collect()
}

/// The embedded rule files with the documents the build script parsed from them (the engine's
/// own rule-file parser, [`nvcre_engine::prepare_rule_file`]), for
/// [`RuleSet::load_prepared`]: the same set as a load of [`embedded_sources`], without parsing
/// YAML (the documents are embedded as JSON, read by the load's parallel pass). A file the
/// build could not prepare comes without documents, and one whose JSON does not read is
/// parsed by the load.
pub fn embedded_prepared() -> Vec<PreparedSource> {
    EMBEDDED
        .iter()
        .enumerate()
        .map(|(i, (name, text))| {
            let docs = PREPARED
                .get(i)
                .copied()
                .flatten()
                .map(|json| Prepared::Json(json.into()));
            (Source::from_static(*name, text), docs)
        })
        .collect()
}

/// The params each stage passes and each table is rendered with, built here so that what
/// [`contract`] declares and what the pipeline passes come from one place (the tests compare
/// each builder's keys with the declared list). Stages not listed here pass no params
/// (callers give `Value::Null`).
pub(crate) mod params {
    use serde_json::{Map, Value, json};

    /// Params of the `workload-labels` stage when it runs at construction.
    pub(crate) const WORKLOAD_LABELS: &[&str] =
        &["labelsPath", "defaultQueue", "defaultQueueLabelKey"];
    /// Params of the `placement` stage.
    pub(crate) const PLACEMENT: &[&str] = &["displaced", "overridesPending"];
    /// Params of the `gang-contract` stage: the `gang-defaults` row, added by `run_stage`.
    pub(crate) const GANG_CONTRACT: &[&str] = &["defaultQueue", "defaultQueueLabelKey"];
    /// Params of the `platform-detection` table.
    pub(crate) const PLATFORM_DETECTION: &[&str] = &["node"];
    /// Params of the `gpu-defaults` table.
    pub(crate) const GPU_DEFAULTS: &[&str] = &[];
    /// Params of the `nccl-base-env` table.
    pub(crate) const NCCL_BASE_ENV: &[&str] = &["enableMNNVL"];
    /// Params of the `nic-detection` table.
    pub(crate) const NIC_DETECTION: &[&str] = &["platform", "gpuArchitecture"];
    /// Params of the `workloadrun-platform-overrides` table.
    pub(crate) const OVERRIDES: &[&str] = &[
        "entryName",
        "nodesPerJob",
        "gpusPerNode",
        "mlnxPerNode",
        "nicResourceName",
        "enableMNNVL",
        "frameworkType",
        "strictDomain",
    ];

    /// Params of the `scheduling` table.
    pub(crate) const SCHEDULING: &[&str] = &["placement", "hasLauncher"];
    /// Params of the `test-scale` table.
    pub(crate) const TEST_SCALE: &[&str] = &["testScale", "numNodes"];

    /// `{placement, hasLauncher}`: the placement mode (`Pinned` | `Unpinned`) and whether the
    /// job has a launcher.
    pub(crate) fn scheduling(placement: &str, has_launcher: bool) -> Value {
        json!({"placement": placement, "hasLauncher": has_launcher})
    }

    /// `{testScale, numNodes}`: `spec.orchestration.testScale` (`""` when unset) and
    /// `spec.numNodes`.
    pub(crate) fn test_scale(test_scale: &str, num_nodes: i64) -> Value {
        json!({"testScale": test_scale, "numNodes": num_nodes})
    }

    /// `{defaultQueue, defaultQueueLabelKey}`: the `gang-defaults` row, which `run_stage` adds
    /// to the params of the `workload-labels` and `gang-contract` stages.
    pub(crate) fn gang_defaults(d: &crate::detect::GangDefaults) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("defaultQueue".into(), Value::String(d.queue.clone()));
        m.insert(
            "defaultQueueLabelKey".into(),
            Value::String(d.queue_label_key.clone()),
        );
        m
    }

    /// `{displaced, overridesPending}`: the values of the WorkloadRun's spec that an override
    /// deleted or replaced, and whether the platform rows are still to be applied (a
    /// WorkloadRun rendered without a platform: what a row supplies is not there yet). The
    /// other post-override stages receive them too and declare no use of them.
    pub(crate) fn placement(displaced: Vec<Value>, overrides_pending: bool) -> Value {
        json!({"displaced": displaced, "overridesPending": overrides_pending})
    }

    /// `{labelsPath}`: where the labels the messages name live.
    pub(crate) fn workload_labels(labels_path: &str) -> Value {
        json!({"labelsPath": labels_path})
    }

    /// `{node: {providerID, labels}}`.
    pub(crate) fn platform_detection(provider_id: &str, labels: &Map<String, Value>) -> Value {
        json!({"node": {"providerID": provider_id, "labels": labels}})
    }

    /// No params.
    pub(crate) fn gpu_defaults() -> Value {
        Value::Null
    }

    /// `{enableMNNVL}`: the resolved MNNVL setting.
    pub(crate) fn nccl_base_env(enable_mnnvl: bool) -> Value {
        json!({"enableMNNVL": enable_mnnvl})
    }

    /// `{platform, gpuArchitecture}` of the node context.
    pub(crate) fn nic_detection(platform: &str, gpu_architecture: &str) -> Value {
        json!({"platform": platform, "gpuArchitecture": gpu_architecture})
    }

    /// The params of the platform override table.
    #[derive(Debug, Clone, Default)]
    pub(crate) struct OverrideParams<'a> {
        /// `metadata.name` of the WorkloadRun (or Workflow).
        pub(crate) entry_name: &'a str,
        /// Nodes per job.
        pub(crate) nodes_per_job: i64,
        /// GPUs per node.
        pub(crate) gpus_per_node: i64,
        /// Mellanox NICs per node.
        pub(crate) mlnx_per_node: i64,
        /// The NIC resource name ("" when none).
        pub(crate) nic_resource_name: &'a str,
        /// The resolved MNNVL setting.
        pub(crate) enable_mnnvl: bool,
        /// `mpi`, `torch`, …
        pub(crate) framework_type: &'a str,
        /// `orchestration.testScale` is `intra-rack`.
        pub(crate) strict_domain: bool,
    }

    impl OverrideParams<'_> {
        /// The params object, keyed as [`OVERRIDES`] lists.
        pub(crate) fn to_value(&self) -> Value {
            json!({
                "entryName": self.entry_name,
                "nodesPerJob": self.nodes_per_job,
                "gpusPerNode": self.gpus_per_node,
                "mlnxPerNode": self.mlnx_per_node,
                "nicResourceName": self.nic_resource_name,
                "enableMNNVL": self.enable_mnnvl,
                "frameworkType": self.framework_type,
                "strictDomain": self.strict_domain,
            })
        }
    }
}

/// The identifiers an override row's `when.expression` is evaluated with
/// (override resolution binds exactly these; the tests check it).
pub const WHEN_VARIABLES: &[&str] = &[
    "platform",
    "gpuArchitecture",
    "workloadKind",
    "topologyMode",
    "domainCount",
];

/// The pipeline contract: the stages the pipeline runs (with the params each passes to its
/// packs) and the tables it renders (with a schema for their rows, the params each is
/// rendered with and, for the override table, the variables of `when.expression`). Every rule
/// set is loaded with it, so a misspelled stage, table or row key is refused at load with its
/// file, line and column.
///
/// The row schemas are derived from the Rust types the rows are decoded into (closed: an
/// unknown key is refused); values templated with `${{ … }}`, `$if`, `$splice` or a fragment
/// are checked only once rendered.
///
/// # Errors
/// [`Error::InvalidContract`] if a declaration is wrong, which the tests rule out (they also
/// compile every row schema, which the contract otherwise compiles on first use).
pub fn contract() -> Result<Contract, Error> {
    Contract::new()
        .stage(
            ADMISSION,
            "WorkloadRun and Workflow admission checks, first",
            &[],
        )
        .stage(
            WORKLOAD_LABELS,
            "workload-object labels, at construction and after overrides",
            params::WORKLOAD_LABELS,
        )
        .stage(
            PLACEMENT,
            "post-override placement checks; sees the user's values the overrides displaced",
            params::PLACEMENT,
        )
        .stage(
            GANG_CONTRACT,
            "post-override gang contract, when spec.gangScheduler names a scheduler",
            params::GANG_CONTRACT,
        )
        .stage(MANIFESTS, "every object render --expand emits", &[])
        .stage_with_objects(
            LINT,
            "objects other than WorkloadRun and Workflow in check; sees objects, the documents of the same input",
            &[],
        )
        .table(
            GANG_DEFAULTS_TABLE,
            "the queue and queue label key of a gang scheduler that leaves them unset",
            row_schema::<GangDefaults>(),
            Some(&[]),
        )
        .table(
            DEFAULTS_TABLE,
            "GPUs and NICs per node and the MNNVL default, by architecture and platform",
            row_schema::<DefaultsRow>(),
            Some(params::GPU_DEFAULTS),
        )
        .table(
            GPU_PRODUCTS_TABLE,
            "GPU product labels and --gpu-arch spellings to architecture names",
            row_schema::<GpuProductRow>(),
            Some(&[]),
        )
        .table(
            LIST_MERGE_TABLE,
            "merge key or replacement per list for override resolution",
            row_schema::<ListMergeRow>(),
            Some(&[]),
        )
        .table(
            NCCL_ENV_TABLE,
            "the NCCL environment every workload container starts from",
            row_schema::<EnvVar>(),
            Some(params::NCCL_BASE_ENV),
        )
        .table(
            NIC_TABLE,
            "where NIC resource names are detected from the nodes",
            row_schema::<NicRow>(),
            Some(params::NIC_DETECTION),
        )
        .table(
            PLATFORM_TABLE,
            "providerID prefixes and node labels to platform",
            row_schema::<PlatformRow>(),
            Some(params::PLATFORM_DETECTION),
        )
        .table(
            RUNTIME_TEMPLATES_TABLE,
            "scripts, mounts, resources, probes and timings of the generated TrainingRuntime",
            row_schema::<RuntimeTemplates>(),
            Some(&["schedulerName"]),
        )
        .table(
            SCHEDULING_TABLE,
            "the tolerations of a job whose target names no taintSelectors",
            row_schema::<SchedulingRow>(),
            Some(params::SCHEDULING),
        )
        .table(
            TEST_SCALE_TABLE,
            "what spec.orchestration.testScale means: nodes per job, strict topology domains",
            row_schema::<TestScale>(),
            Some(params::TEST_SCALE),
        )
        .table(
            OVERRIDE_TABLE,
            "platform and GPU overrides applied to WorkloadRun builds",
            row_schema::<PlatformOverride>(),
            Some(params::OVERRIDES),
        )
        .cel_field(OVERRIDE_TABLE, "/when/expression", WHEN_VARIABLES)
        .map(|c| {
            c.document_kind(
                crate::measure::LOG_PROFILE_KIND,
                "how a framework's log is parsed into bandwidth and goodput measurements",
                crate::measure::check_document,
            )
        })
}

/// The schemas [`rule_file_schema`] knows besides one per table: a `RulePack` document, a
/// `Table` document of any declared table, a rule test suite, a `LogProfile` document.
pub const SCHEMA_KINDS: &[&str] = &["pack", "table", "suite", "log-profile"];

/// Every name [`rule_file_schema`] accepts: [`SCHEMA_KINDS`], then each table of
/// [`contract`] in declaration order.
///
/// # Errors
/// [`Error::InvalidContract`], which the tests rule out.
pub fn schema_names() -> Result<Vec<String>, Error> {
    let contract = contract()?;
    Ok(SCHEMA_KINDS
        .iter()
        .map(|k| (*k).to_string())
        .chain(contract.tables().iter().map(|t| t.name.clone()))
        .collect())
}

/// The JSON Schema (draft 2020-12) named `name`: `pack` (a `RulePack` document, from the
/// engine's loader types), `table` (a `Table` document; its entries are checked against the
/// row schema of the table `metadata.name` names), `suite` (a rule test suite, from the suite
/// format's serde types) or a table name (that table's file). `None` for any other name.
///
/// # Errors
/// [`Error::InvalidContract`], which the tests rule out.
pub fn rule_file_schema(name: &str) -> Result<Option<serde_json::Value>, Error> {
    let contract = contract()?;
    Ok(match name {
        "pack" => Some(nvcre_engine::schema::pack_file_schema()),
        "table" => Some(nvcre_engine::schema::table_file_schema(&contract)),
        "suite" => Some(crate::suite::suite_schema()),
        "log-profile" => Some(log_profile_schema()),
        other => nvcre_engine::schema::one_table_file_schema(&contract, other),
    })
}

/// The schema of a `LogProfile` document (rule file or cluster object): apiVersion, kind,
/// `metadata.name` and the spec, derived from [`crate::measure::LogProfileSpec`].
fn log_profile_schema() -> serde_json::Value {
    serde_json::json!({
        "$schema": nvcre_engine::schema::DRAFT_2020_12,
        "description": "a LogProfile (rules/measure/*.yaml): how a framework's log is parsed into measurements",
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": {"const": crate::api::API_VERSION},
            "kind": {"const": crate::measure::LOG_PROFILE_KIND},
            "metadata": {
                "type": "object",
                "required": ["name"],
                "properties": {"name": {"type": "string", "minLength": 1}},
            },
            "spec": row_schema::<crate::measure::LogProfileSpec>(),
        },
        "additionalProperties": false,
    })
}

/// The embedded default rule set, compiled with [`contract`] (the test suite loads it with
/// every check, see [`load_rules`]).
///
/// # Errors
/// Only if an embedded file does not load, which the test suite rules out: every problem.
pub fn default_rules() -> Result<RuleSet, LoadErrors> {
    RuleSet::load_prepared_trusted(embedded_prepared(), Some(&contract()?))
}

/// The rule files of `dir` when given (as [`load_rules`] reads them), else the embedded ones;
/// not loaded, so that [`nvcre_engine::lint`] can report every problem.
///
/// # Errors
/// Every unreadable entry ([`Error::Io`], [`Error::SymlinkLoop`]); [`Error::Pack`] for a
/// directory without rule files.
pub fn rule_sources(dir: Option<&Path>) -> Result<Vec<Arc<Source>>, LoadErrors> {
    match dir {
        Some(d) => RuleSet::read_dir(d),
        None => Ok(embedded_sources()),
    }
}

/// The rule set of `dir` for a caller that swaps whole sets at run time (a controller reloading
/// a mounted ConfigMap): as [`load_rules`], and a set in which a table the pipeline renders is
/// defined by no file is refused too, so a ConfigMap that lost a key never replaces a good set.
/// A set that loads must then pass [`crate::trial_render`]: one that loads but cannot render
/// (a table emptied of the rows the pipeline needs) would fail every run it is given.
///
/// # Errors
/// Every load error, including `nvcre::rules::missing_table` for each missing table; else the
/// first failure of the trial renders.
pub fn load_complete_rules(dir: &Path) -> Result<RuleSet, LoadErrors> {
    let contract = contract()?.require_every_table(true);
    let set = RuleSet::load_dir_with(dir, Some(&contract))?;
    crate::trial_render(&set, &dir.display().to_string()).map_err(|e| LoadErrors::new(vec![e]))?;
    Ok(set)
}

/// The rule set from `dir` when given, else the embedded default set, loaded with
/// [`contract`]. All or nothing: a directory that defines some of the pipeline's tables but not
/// all is refused as [`load_complete_rules`] refuses it. A directory gets every load check;
/// the embedded set, which the test suite loads with every check, is only compiled
/// ([`RuleSet::load_prepared_trusted`]).
///
/// # Errors
/// Every problem: unreadable files, [`Error::Pack`] and [`Error::Contract`] with file, line,
/// column and rule id.
pub fn load_rules(dir: Option<&Path>) -> Result<RuleSet, LoadErrors> {
    match dir {
        // A set that defines some of the tables the pipeline renders is a whole set: one that
        // lost a table, a stage's packs or a file's contents (a deleted file, a ConfigMap
        // key emptied) is refused, as a controller refuses it, with an error for each. A
        // directory of packs alone defines none and is used as it is.
        Some(d) => RuleSet::load_dir_with(d, Some(&contract()?.complete_when_whole(true))),
        // The embedded set is loaded in full by the test suite
        // (`the_embedded_set_passes_every_load_check`); here it is only compiled.
        None => RuleSet::load_prepared_trusted(embedded_prepared(), Some(&contract()?)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_set_passes_every_load_check() {
        // `load_rules(None)` skips the checks that can only find problems; this is where
        // the embedded set meets them all, and compiles to the same set.
        let contract = contract().expect("the contract builds");
        contract
            .compile_row_schemas()
            .expect("every row schema compiles");
        let full = RuleSet::load_prepared(embedded_prepared(), Some(&contract))
            .expect("the embedded set loads with every check");
        let trusted = load_rules(None).expect("the embedded set loads");
        let shape = |set: &RuleSet| {
            let packs: Vec<String> = set
                .packs()
                .iter()
                .map(|p| {
                    let ids: Vec<&str> = p.rules.iter().map(|r| r.id.as_str()).collect();
                    format!("{} {:?} {}", p.name, p.stage, ids.join(","))
                })
                .collect();
            let tables: Vec<String> = set
                .tables
                .iter()
                .map(|t| {
                    let ids: Vec<&str> = t.entries.iter().map(|e| e.id.as_str()).collect();
                    format!("{} {}", t.name, ids.join(","))
                })
                .collect();
            (packs, tables, set.documents.len())
        };
        assert_eq!(shape(&trusted), shape(&full));
        assert_eq!((shape(&full).0.len(), shape(&full).1.len()), (13, 11));
    }

    #[test]
    fn every_rule_file_is_embedded() {
        // What `--rules rules` reads (hidden entries and tests/ skipped) is what the binary
        // embeds, name for name and byte for byte.
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let on_disk: Vec<(String, String)> = RuleSet::read_dir(&root.join("rules"))
            .expect("rules/ reads")
            .iter()
            .map(|s| {
                let name = Path::new(&s.name)
                    .strip_prefix(&root)
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|_| s.name.clone());
                (name, s.text.to_string())
            })
            .collect();
        let embedded: Vec<(String, String)> = embedded_sources()
            .iter()
            .map(|s| (s.name.clone(), s.text.to_string()))
            .collect();
        let names = |v: &[(String, String)]| v.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
        assert_eq!(names(&embedded), names(&on_disk));
        assert_eq!(embedded, on_disk);
        assert_eq!(embedded.len(), 27);
    }

    #[test]
    fn prepared_documents_are_what_parsing_the_embedded_sources_gives() {
        // Every file prepared (none left to parse at run time), and each one's documents equal,
        // value for value and span for span, to what the load of its text builds.
        let prepared = embedded_prepared();
        assert_eq!(prepared.len(), embedded_sources().len());
        for (source, docs) in prepared {
            let docs: Vec<nvcre_engine::PreparedDocument> = match docs {
                Some(Prepared::Json(json)) => serde_json::from_str(&json).expect("reads"),
                other => panic!("{} is not prepared: {other:?}", source.name),
            };
            let parsed = nvcre_engine::parse_rule_file(&source).expect("parses");
            assert_eq!(docs.len(), parsed.len(), "{}", source.name);
            for (p, d) in docs.iter().zip(&parsed) {
                assert_eq!(p.index, d.index, "{}", source.name);
                assert_eq!(p.value, d.value, "{} document {}", source.name, d.index);
                assert_eq!(p.spans, d.spans, "{} document {}", source.name, d.index);
            }
        }
    }

    #[test]
    fn the_prepared_set_is_the_parsed_set() {
        let c = contract().expect("contract");
        let prepared = RuleSet::load_prepared(embedded_prepared(), Some(&c)).expect("loads");
        let parsed = RuleSet::load(&embedded_sources(), Some(&c)).expect("loads");
        let ids = |s: &RuleSet| {
            s.rules()
                .map(|(p, r)| format!("{}/{}@{}", p.name, r.id, r.pos))
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(&prepared), ids(&parsed));
    }

    #[test]
    fn only_documents_a_pack_reading_objects_checks_gather_them() {
        let rules = default_rules().expect("loads");
        let reading: Vec<&str> = rules
            .packs()
            .iter()
            .filter(|p| p.reads_objects())
            .map(|p| p.name.as_str())
            .collect();
        assert_eq!(reading, ["measurement-lint", "workload-lint"]);
        let doc = |api: &str, kind: &str| serde_json::json!({"apiVersion": api, "kind": kind});
        let train_job = doc("trainer.kubeflow.org/v1alpha1", "TrainJob");
        let run = doc(crate::api::API_VERSION, "WorkloadRun");
        let reads = |v: &serde_json::Value| crate::check::reads_objects(&rules, v);
        assert!(reads(&train_job));
        assert!(!reads(&run));
        assert!(!reads(&doc(crate::api::API_VERSION, "Workflow")));
        // Two LogProfiles of one name in an input are one's error.
        assert!(reads(&doc(crate::api::API_VERSION, "LogProfile")));
        assert!(!reads(&doc("v1", "ConfigMap")));
        assert!(!reads(&serde_json::json!({"a": 1})));
        let list = |items: Vec<serde_json::Value>| serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
        assert!(reads(&list(vec![run.clone(), train_job])));
        assert!(!reads(&list(vec![run])));
    }

    /// Clean but for the `cel-cost` warnings (estimates above the per-expression limit) the
    /// CLI test `the_shipped_rules_lint_clean_but_for_cost_estimates` lists.
    #[test]
    fn embedded_rules_lint_clean() {
        let contract = contract().expect("contract");
        let (cost, other): (Vec<_>, Vec<_>) =
            nvcre_engine::lint(&embedded_sources(), Some(&contract))
                .into_iter()
                .partition(|f| f.lint == nvcre_engine::Lint::CelCost);
        let other: Vec<String> = other.iter().map(ToString::to_string).collect();
        assert_eq!(other, Vec::<String>::new());
        let files: Vec<&str> = cost.iter().map(|f| f.file.as_str()).collect();
        let mut want = vec!["rules/contract/manifests.yaml"; 1];
        want.extend(["rules/contract/mpi.yaml"; 5]);
        want.extend(["rules/contract/pod-templates.yaml"; 3]);
        want.extend(["rules/contract/resources.yaml"; 4]);
        want.extend(["rules/lint/workloads.yaml"; 21]);
        assert_eq!(files, want);
    }

    fn keys(v: &serde_json::Value) -> Vec<&str> {
        v.as_object()
            .map(|m| m.keys().map(String::as_str).collect())
            .unwrap_or_default()
    }

    #[test]
    fn declared_params_are_what_the_callers_pass() {
        let c = contract().expect("contract");
        let stage = |n: &str| {
            c.stages()
                .iter()
                .find(|s| s.name == n)
                .map(|s| s.params.clone())
                .expect("stage")
        };
        let table = |n: &str| {
            c.tables()
                .iter()
                .find(|t| t.name == n)
                .and_then(|t| t.params.clone())
                .expect("table params")
        };
        let defaults_value = serde_json::Value::Object(params::gang_defaults(
            &crate::detect::GangDefaults::default(),
        ));
        let defaults = keys(&defaults_value);
        let labels_value = params::workload_labels("x");
        let mut labels = keys(&labels_value);
        labels.extend(defaults.iter().copied());
        assert_eq!(stage(WORKLOAD_LABELS), labels);
        assert_eq!(stage(GANG_CONTRACT), defaults);
        assert_eq!(
            stage(PLACEMENT),
            keys(&params::placement(Vec::new(), false))
        );
        for s in [ADMISSION, MANIFESTS] {
            assert_eq!(stage(s), Vec::<String>::new(), "{s}");
        }
        assert_eq!(
            table(PLATFORM_TABLE),
            keys(&params::platform_detection("", &serde_json::Map::new()))
        );
        assert_eq!(table(DEFAULTS_TABLE), keys(&params::gpu_defaults()));
        assert_eq!(
            table(SCHEDULING_TABLE),
            keys(&params::scheduling("Pinned", true))
        );
        assert_eq!(table(TEST_SCALE_TABLE), keys(&params::test_scale("", 2)));
        assert_eq!(table(NCCL_ENV_TABLE), keys(&params::nccl_base_env(true)));
        assert_eq!(
            table(NIC_TABLE),
            keys(&params::nic_detection("aws", "h100"))
        );
        assert_eq!(
            table(OVERRIDE_TABLE),
            keys(&params::OverrideParams::default().to_value())
        );
        assert_eq!(
            c.tables()
                .iter()
                .find(|t| t.name == OVERRIDE_TABLE)
                .map(|t| t.cel_fields.clone()),
            Some(vec![nvcre_engine::CelField {
                pointer: "/when/expression".to_string(),
                variables: WHEN_VARIABLES.iter().map(|v| v.to_string()).collect(),
            }])
        );
    }

    #[test]
    fn when_variables_are_the_ones_when_matches_binds() {
        use crate::api::WhenSpec;
        use crate::resolve::{OverrideContext, when_matches};
        let ctx = OverrideContext::build_time("aws", "h100");
        for v in WHEN_VARIABLES {
            let when = WhenSpec {
                expression: Some(format!("{v} == {v}")),
                ..WhenSpec::default()
            };
            assert_eq!(when_matches(&when, &ctx), Ok(true), "{v}");
        }
        let when = WhenSpec {
            expression: Some("config == null".to_string()),
            ..WhenSpec::default()
        };
        assert!(when_matches(&when, &ctx).is_err());
    }

    fn load_override_rows(rows: &str) -> Vec<String> {
        let text = format!(
            "apiVersion: policy.nvcre.nvidia.com/v1alpha1\nkind: Table\nmetadata: {{name: workloadrun-platform-overrides}}\nentries:\n{rows}"
        );
        let contract = contract().expect("contract");
        match RuleSet::load(&[Source::new("o.yaml", text)], Some(&contract)) {
            Ok(_) => Vec::new(),
            Err(e) => e.errors.iter().map(ToString::to_string).collect(),
        }
    }

    #[test]
    fn override_rows_are_closed_and_when_expressions_read_declared_variables_only() {
        assert_eq!(
            load_override_rows(
                "- id: a\n  when: {platfrom: {equals: aws}, expression: \"platform == 'aws' && gpuArch == 'h100' && [1].all(x, x > 0)\"}\n  mpiArgs: [-x, A=1]\n- id: b\n  when: {expression: 'platform ==', topology: {mode: simple}}\n- id: c\n  when: {expression: \"${{ params.entryName }}\"}\n"
            ),
            [
                "rule pack error: o.yaml:6:10: entry a: unknown key \"platfrom\" in a row of table \"workloadrun-platform-overrides\"; known keys: platform, gpuArchitecture, workloadKind, topology, config, expression",
                "rule pack error: o.yaml:6:47: entry a: when.expression reads \"gpuArch\", which it is not evaluated with; variables: platform, gpuArchitecture, workloadKind, topologyMode, domainCount",
                "rule pack error: o.yaml:9:22: entry b: when.expression does not compile: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER} (expression column 12)",
            ]
        );
    }

    #[test]
    fn when_expressions_that_call_unknown_functions_are_refused() {
        assert_eq!(
            load_override_rows(
                "- id: a\n  when: {platform: {equals: aws}, expression: \"platform == 'aws' || sizee(platform) > 0 || platform.startsWith('a')\"}\n  mpiArgs: [-x, A=1]\n"
            ),
            [
                "rule pack error: o.yaml:6:47: entry a: when.expression: sizee is not a function or method of the CEL library here; variables: platform, gpuArchitecture, workloadKind, topologyMode, domainCount",
            ]
        );
    }

    #[test]
    fn embedded_rules_compile_and_have_every_stage() {
        let set = default_rules().expect("embedded rules compile");
        for stage in ["admission", "placement", "workload-labels", "gang-contract"] {
            assert!(
                set.stage(stage).next().is_some(),
                "no pack for stage {stage}"
            );
        }
        for table in [
            "gpu-defaults",
            "platform-detection",
            "workloadrun-platform-overrides",
        ] {
            assert!(set.table(table).is_some(), "no table {table}");
        }
    }
}
