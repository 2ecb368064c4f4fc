//! Build: a [`WorkloadRun`] into a [`Workflow`] (render-pipeline.md §1.2, §4, §5.1, §5.2, §5.5).
//!
//! Every function here is pure: no I/O, no printing, no cluster. What the build needs beyond the
//! WorkloadRun (detected GPU counts, matching platform `mpiArgs` and `preCommand` lines, the
//! default timeout) arrives resolved in [`BuildParams`]. The platform override list itself is not
//! built here: [`build_workflow`] leaves `spec.overrides` empty for the caller to fill.
//!
//! JSON is written in the order a person writes a manifest (`apiVersion`, `kind`, `metadata`,
//! `spec`; `name` first in containers); label maps are sorted by key.

use std::collections::{BTreeMap, BTreeSet};

use nvcre_engine::go_quote;
use serde_json::{Map, Value, json};

use crate::api::{
    API_VERSION, EnvVar, FrameworkType, GangSchedulerSpec, KAI_SCHEDULER, ObjectMeta, Workflow,
    WorkflowSpec, WorkloadRun, WorkloadRunSpec,
};

/// `apiVersion` of the generated TrainingRuntime.
pub const TRAINER_API_VERSION: &str = "trainer.kubeflow.org/v1alpha1";
/// The field manager of the controller-owned TrainJob runtimePatch.
pub const CONTROLLER_MANAGER: &str = "nvcre.nvidia.com/controller";
/// The Workflow's default `execution.timeoutPerJob` (what the original writes; its API comment's
/// "1h" is stale).
pub const DEFAULT_TIMEOUT_PER_JOB: &str = "24h0m0s";
/// The metric names `spec.thresholds` accepts, in the order the error message lists them.
pub const VALID_THRESHOLD_KEYS: [&str; 5] = [
    "busBandwidthGBps",
    "algBandwidthGBps",
    "goodputRatio",
    "avgTFLOPsPerGPU",
    "avgStepTimeSec",
];
/// The `nodeHealthMonitor` CEL expression every generated Job carries.
pub const NODE_HEALTH_EXPRESSION: &str = "node.spec.unschedulable == true";

const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
const MANAGED_BY_VALUE: &str = "nvcre";
const WORKLOAD_RUN_LABEL: &str = "nvcre.nvidia.com/workload-run";
const FRAMEWORK_LABEL: &str = "trainer.kubeflow.org/framework";
const ANCESTOR_STEP_LABEL: &str = "trainer.kubeflow.org/trainjob-ancestor-step";
const GPU_RESOURCE: &str = "nvidia.com/gpu";
const SSH_RAW_PATH: &str = "/tmp/mpi-ssh-raw";
const MPI_TIMEOUT_SECONDS: &str = "3600";
/// The `plm_rsh_args` value: one argv element.
const PLM_RSH_ARGS: &str = "-o StrictHostKeyChecking=no -o ConnectionAttempts=10";
/// Tries and spacing of the KAI worker wait (240 × 5 s = 20 min).
const KAI_WAIT_TRIES: u32 = 240;
const KAI_WAIT_SLEEP_SECONDS: u32 = 5;

/// Everything the build needs beyond the WorkloadRun, resolved by the caller from detection, the
/// GPU defaults table and the platform override table.
#[derive(Debug, Clone, PartialEq)]
pub struct BuildParams {
    /// GPUs per node, with `spec.gpusPerNode` already applied.
    pub gpus_per_node: i64,
    /// The base NCCL env (rules/defaults/nccl-env.yaml, with the resolved MNNVL setting);
    /// `spec.env` is merged over it by name.
    pub base_env: Vec<EnvVar>,
    /// `mpiArgs` of the matching platform overrides, already in final order (later matches
    /// first); prepended to the user's `mpiArgs`.
    pub platform_mpi_args: Vec<String>,
    /// `preCommand` lines of the matching platform overrides, in table order; empty means the
    /// trainer command is not wrapped.
    pub pre_command: Vec<String>,
    /// `execution.timeoutPerJob` when the spec gives none, e.g. [`DEFAULT_TIMEOUT_PER_JOB`].
    pub default_timeout_per_job: String,
}

/// Why a WorkloadRun could not be built into a Workflow.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// None of `spec.framework.torch`, `mpi` or `exec` is set (the original's `BuildFailed`
    /// message, kept verbatim).
    #[error("workloadrun {name}: exec framework selected but spec.framework.exec is nil")]
    NoFramework {
        /// The WorkloadRun's name.
        name: String,
    },
    /// `spec.thresholds` names metrics outside [`VALID_THRESHOLD_KEYS`].
    #[error(
        "workloadrun {name}: unknown threshold key(s) [{}]; valid keys: [{}]",
        keys.join(" "),
        VALID_THRESHOLD_KEYS.join(", ")
    )]
    UnknownThresholdKeys {
        /// The WorkloadRun's name.
        name: String,
        /// The unknown keys, sorted.
        keys: Vec<String>,
    },
    /// `spec.orchestration.timeoutPerJob` is not a Go duration, or is negative. (The original
    /// silently fell back to the default; we refuse.)
    #[error("spec.orchestration.timeoutPerJob: invalid duration \"{value}\": {reason}")]
    InvalidTimeoutPerJob {
        /// The value as written.
        value: String,
        /// What is wrong with it.
        reason: DurationError,
    },
}

/// Why a Go duration string (`1h30m`, `90s`, `1.5h`, `300ms`) was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DurationError {
    /// Not a sequence of decimal numbers each followed by a unit.
    #[error("expected decimal numbers each followed by a unit, such as \"90s\" or \"1h30m\"")]
    Syntax,
    /// A number without a unit (only a bare `0` may omit it).
    #[error("missing unit; valid units are ns, us, µs, ms, s, m, h")]
    MissingUnit,
    /// A unit Go does not know.
    #[error("unknown unit \"{unit}\"; valid units are ns, us, µs, ms, s, m, h")]
    UnknownUnit {
        /// The unit as written.
        unit: String,
    },
    /// Longer than a Go `time.Duration` holds.
    #[error("out of range; the longest duration is 2562047h47m16.854775807s")]
    Overflow,
    /// Below zero.
    #[error("a timeout cannot be negative")]
    Negative,
}

/// Merges `spec.env` over the base env (render-pipeline.md §4.2): base entries the user names are
/// dropped, the rest keep their order, then every user entry follows in user order, so an
/// overridden name moves to the end.
///
/// ```
/// use nvcre_domain::api::EnvVar;
/// use nvcre_domain::build::merge_env;
/// let base = [EnvVar::new("A", "1"), EnvVar::new("B", "1")];
/// let merged = merge_env(&base, &[EnvVar::new("A", "2")]);
/// assert_eq!(merged, [EnvVar::new("B", "1"), EnvVar::new("A", "2")]);
/// ```
pub fn merge_env(base: &[EnvVar], user: &[EnvVar]) -> Vec<EnvVar> {
    base.iter()
        .filter(|b| !user.iter().any(|u| u.name == b.name))
        .chain(user)
        .cloned()
        .collect()
}

/// The names `mpi_args` already forwards with `-x` (the operand's text before `=`).
fn forwarded_names(mpi_args: &[String]) -> BTreeSet<&str> {
    let mut names = BTreeSet::new();
    let mut args = mpi_args.iter();
    while let Some(arg) = args.next() {
        if arg == "-x" {
            if let Some(operand) = args.next() {
                names.insert(operand.split_once('=').map_or(operand.as_str(), |(n, _)| n));
            }
        }
    }
    names
}

/// Forwards the merged env to the MPI ranks (render-pipeline.md §4.4 step 2): `-x`, `NAME=value`
/// as two argv items per variable, a bare `-x`, `NAME` for a `valueFrom` variable, skipping names
/// that `mpi_args` already forwards with `-x`.
///
/// ```
/// use nvcre_domain::api::EnvVar;
/// use nvcre_domain::build::mpi_env_args;
/// let env = [EnvVar::new("A", "1"), EnvVar::new("B", "1")];
/// let args = mpi_env_args(&env, &["-x".to_string(), "B=2".to_string()]);
/// assert_eq!(args, ["-x", "A=1"]);
/// ```
pub fn mpi_env_args(merged: &[EnvVar], mpi_args: &[String]) -> Vec<String> {
    let forwarded = forwarded_names(mpi_args);
    let mut out = Vec::with_capacity(merged.len() * 2);
    for var in merged {
        if forwarded.contains(var.name.as_str()) {
            continue;
        }
        out.push("-x".to_string());
        if var.value_from.is_some() {
            out.push(var.name.clone());
        } else {
            out.push(format!(
                "{}={}",
                var.name,
                var.value.as_deref().unwrap_or("")
            ));
        }
    }
    out
}

/// The whole mpirun argument list (render-pipeline.md §4.4): `-N <gpus> --allow-run-as-root
/// --mca plm_rsh_args <one element>`, the env forwarding of [`mpi_env_args`], `mpi_args`
/// (platform args already prepended by the caller), the binary, then its args.
///
/// ```
/// use nvcre_domain::build::layout_mpirun_args;
/// let args = layout_mpirun_args(8, &[], &[], "/bin/true", &["-v".to_string()]);
/// assert_eq!(args[..3], ["-N", "8", "--allow-run-as-root"]);
/// assert_eq!(args[5], "-o StrictHostKeyChecking=no -o ConnectionAttempts=10");
/// assert_eq!(args[6..], ["/bin/true", "-v"]);
/// ```
pub fn layout_mpirun_args(
    gpus_per_node: i64,
    merged: &[EnvVar],
    mpi_args: &[String],
    binary: &str,
    args: &[String],
) -> Vec<String> {
    let mut out: Vec<String> = vec![
        "-N".to_string(),
        gpus_per_node.to_string(),
        "--allow-run-as-root".to_string(),
        "--mca".to_string(),
        "plm_rsh_args".to_string(),
        PLM_RSH_ARGS.to_string(),
    ];
    out.extend(mpi_env_args(merged, mpi_args));
    out.extend(mpi_args.iter().cloned());
    out.push(binary.to_string());
    out.extend(args.iter().cloned());
    out
}

/// Wraps a trainer command in the platform `preCommand` lines (render-pipeline.md §4.5): the
/// script is the lines, then `exec` and every command and arg element quoted like Go's `%q`,
/// joined by newlines. Returns `(["/bin/bash", "-c"], [script])`.
///
/// ```
/// use nvcre_domain::build::wrap_pre_command;
/// let pre = ["unset X".to_string()];
/// let (command, args) = wrap_pre_command(&pre, &["echo".to_string()], &["a \"b\"".to_string()]);
/// assert_eq!(command, ["/bin/bash", "-c"]);
/// assert_eq!(args, ["unset X\nexec \"echo\" \"a \\\"b\\\"\""]);
/// ```
pub fn wrap_pre_command(
    pre: &[String],
    command: &[String],
    args: &[String],
) -> (Vec<String>, Vec<String>) {
    let quoted: Vec<String> = command.iter().chain(args).map(|s| go_quote(s)).collect();
    let mut lines = pre.to_vec();
    lines.push(format!("exec {}", quoted.join(" ")));
    (
        vec!["/bin/bash".to_string(), "-c".to_string()],
        vec![lines.join("\n")],
    )
}

/// Parses a Go duration string and writes it the way Go's `time.Duration.String()` does
/// (`90m` → `1h30m0s`, `1.5h` → `1h30m0s`, `0.5s` → `500ms`). Negative values are refused.
///
/// ```
/// use nvcre_domain::build::canonical_go_duration;
/// assert_eq!(canonical_go_duration("90m")?, "1h30m0s");
/// assert!(canonical_go_duration("-1s").is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn canonical_go_duration(value: &str) -> Result<String, DurationError> {
    let nanos = parse_go_duration(value)?;
    let nanos = u64::try_from(nanos).map_err(|_| DurationError::Negative)?;
    Ok(format_go_duration(nanos))
}

/// One past the largest magnitude a Go duration holds (`1 << 63`).
const DURATION_LIMIT: u64 = 1 << 63;

/// Go's `time.ParseDuration`: `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+`, or a bare `0`; nanoseconds.
fn parse_go_duration(orig: &str) -> Result<i64, DurationError> {
    let (negative, mut rest) = match orig.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, orig.strip_prefix('+').unwrap_or(orig)),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(DurationError::Syntax);
    }
    let mut total: u64 = 0;
    while !rest.is_empty() {
        if !rest.starts_with(|c: char| c == '.' || c.is_ascii_digit()) {
            return Err(DurationError::Syntax);
        }
        let (int_digits, after_int) = split_digits(rest);
        let whole = leading_int(int_digits)?;
        rest = after_int;
        let (mut frac, mut scale, mut has_frac) = (0u64, 1f64, false);
        if let Some(after_dot) = rest.strip_prefix('.') {
            let (frac_digits, after_frac) = split_digits(after_dot);
            (frac, scale) = leading_fraction(frac_digits);
            has_frac = !frac_digits.is_empty();
            rest = after_frac;
        }
        if int_digits.is_empty() && !has_frac {
            return Err(DurationError::Syntax);
        }
        let unit_len = rest
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (unit, after_unit) = rest.split_at_checked(unit_len).unwrap_or((rest, ""));
        if unit.is_empty() {
            return Err(DurationError::MissingUnit);
        }
        rest = after_unit;
        let unit_nanos: u64 = match unit {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => {
                return Err(DurationError::UnknownUnit {
                    unit: unit.to_string(),
                });
            }
        };
        if whole > DURATION_LIMIT / unit_nanos {
            return Err(DurationError::Overflow);
        }
        let mut part = whole * unit_nanos;
        if frac > 0 {
            // Go computes the fractional part in float64 too.
            let extra = (frac as f64 * (unit_nanos as f64 / scale)) as u64;
            part = part.checked_add(extra).ok_or(DurationError::Overflow)?;
            if part > DURATION_LIMIT {
                return Err(DurationError::Overflow);
            }
        }
        total = total.checked_add(part).ok_or(DurationError::Overflow)?;
        if total > DURATION_LIMIT {
            return Err(DurationError::Overflow);
        }
    }
    if negative {
        // total ≤ 1 << 63, so its negation fits.
        return Ok(0i64.wrapping_sub_unsigned(total));
    }
    i64::try_from(total).map_err(|_| DurationError::Overflow)
}

/// Splits off the leading ASCII digits.
fn split_digits(s: &str) -> (&str, &str) {
    let n = s.bytes().take_while(u8::is_ascii_digit).count();
    s.split_at_checked(n).unwrap_or((s, ""))
}

/// Go's `leadingInt` over an all-digit string.
fn leading_int(digits: &str) -> Result<u64, DurationError> {
    let mut x: u64 = 0;
    for d in digits.bytes() {
        if x > DURATION_LIMIT / 10 {
            return Err(DurationError::Overflow);
        }
        x = x * 10 + u64::from(d - b'0');
        if x > DURATION_LIMIT {
            return Err(DurationError::Overflow);
        }
    }
    Ok(x)
}

/// Go's `leadingFraction`: the digits as an integer and the power of ten they were scaled by;
/// digits past what fits are ignored.
fn leading_fraction(digits: &str) -> (u64, f64) {
    let (mut x, mut scale) = (0u64, 1f64);
    for d in digits.bytes() {
        if x > (DURATION_LIMIT - 1) / 10 {
            break;
        }
        let y = x * 10 + u64::from(d - b'0');
        if y > DURATION_LIMIT {
            break;
        }
        x = y;
        scale *= 10.0;
    }
    (x, scale)
}

/// Go's `time.Duration.String()` for a non-negative duration.
fn format_go_duration(nanos: u64) -> String {
    if nanos == 0 {
        return "0s".to_string();
    }
    if nanos < 1_000_000_000 {
        let (precision, unit) = match nanos {
            n if n < 1_000 => (0, "ns"),
            n if n < 1_000_000 => (3, "\u{b5}s"),
            _ => (6, "ms"),
        };
        let (whole, frac) = split_fraction(nanos, precision);
        return format!("{whole}{frac}{unit}");
    }
    let (secs, frac) = split_fraction(nanos, 9);
    let (minutes, secs) = (secs / 60, secs % 60);
    if minutes == 0 {
        return format!("{secs}{frac}s");
    }
    let (hours, minutes) = (minutes / 60, minutes % 60);
    if hours == 0 {
        return format!("{minutes}m{secs}{frac}s");
    }
    format!("{hours}h{minutes}m{secs}{frac}s")
}

/// `value / 10^precision` and the remainder as `.ddd` with trailing zeros removed (or empty).
fn split_fraction(value: u64, precision: u32) -> (u64, String) {
    let p = 10u64.pow(precision);
    let (whole, rem) = (value / p, value % p);
    if rem == 0 {
        return (whole, String::new());
    }
    let digits = format!("{rem:0width$}", width = precision as usize);
    (whole, format!(".{}", digits.trim_end_matches('0')))
}

/// `1` for `testScale: intra-node`, else `spec.numNodes` (render-pipeline.md §1.2 step 9).
fn nodes_per_job(spec: &WorkloadRunSpec) -> i64 {
    let intra_node = spec
        .orchestration
        .as_ref()
        .and_then(|o| o.test_scale.as_deref())
        == Some("intra-node");
    if intra_node { 1 } else { spec.num_nodes }
}

/// A sorted label map.
fn label_map<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Value {
    let sorted: BTreeMap<&str, &str> = pairs.into_iter().collect();
    Value::Object(
        sorted
            .into_iter()
            .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
            .collect(),
    )
}

/// The queue label `(key, queue)` when gang scheduling is on.
fn queue_label(gang: Option<&GangSchedulerSpec>) -> Option<(&str, &str)> {
    gang.map(|g| (g.queue_label_key(), g.queue()))
}

/// Volumes and mounts from the spec: the user's, then `config-volume` at `/config` when
/// `spec.config` is set (render-pipeline.md §1.2 step 8).
fn user_volumes(run: &WorkloadRun) -> (Vec<Value>, Vec<Value>) {
    let mut volumes = run.spec.volumes.clone();
    let mut mounts = run.spec.volume_mounts.clone();
    if let Some(config) = &run.spec.config {
        let config_map = match &config.config_map_ref {
            Some(r) => r.name.clone(),
            None => format!("{}-config", run.metadata.name),
        };
        volumes.push(json!({
            "name": "config-volume",
            "configMap": {"name": config_map, "defaultMode": 0o755},
        }));
        mounts.push(json!({"name": "config-volume", "mountPath": "/config"}));
    }
    (volumes, mounts)
}

/// Worker container resources (render-pipeline.md §4.6): `nvidia.com/gpu: "<gpus>"` in limits
/// and requests without `spec.resources`; with it, the user's block, plus the GPU count in both
/// maps only when neither names `nvidia.com/gpu` and `gpus > 0`.
fn worker_resources(resources: Option<&Value>, gpus: i64) -> Value {
    let gpu_count = Value::String(gpus.to_string());
    let Some(user) = resources else {
        return json!({
            "limits": {GPU_RESOURCE: gpu_count.clone()},
            "requests": {GPU_RESOURCE: gpu_count},
        });
    };
    let mut out = user.clone();
    let Some(block) = out.as_object_mut() else {
        return out;
    };
    let names_gpu = ["limits", "requests"].iter().any(|k| {
        block
            .get(*k)
            .and_then(Value::as_object)
            .is_some_and(|m| m.contains_key(GPU_RESOURCE))
    });
    if names_gpu || gpus <= 0 {
        return out;
    }
    for key in ["limits", "requests"] {
        let slot = block
            .entry(key)
            .or_insert_with(|| Value::Object(Map::new()));
        if slot.is_null() {
            *slot = Value::Object(Map::new());
        }
        if let Some(map) = slot.as_object_mut() {
            map.insert(GPU_RESOURCE.to_string(), gpu_count.clone());
        }
    }
    out
}

/// A replicated job: `{name, dependsOn?, template: {metadata?: {labels}, spec: {template}}}`.
fn replicated_job(
    name: &str,
    depends_on: Option<Value>,
    job_labels: Option<Value>,
    pod_template: Value,
) -> Value {
    let mut job_template = Map::new();
    if let Some(labels) = job_labels {
        job_template.insert("metadata".to_string(), json!({"labels": labels}));
    }
    job_template.insert("spec".to_string(), json!({"template": pod_template}));
    let mut job = Map::new();
    job.insert("name".to_string(), Value::String(name.to_string()));
    if let Some(d) = depends_on {
        job.insert("dependsOn".to_string(), d);
    }
    job.insert("template".to_string(), Value::Object(job_template));
    Value::Object(job)
}

/// A pod template: queue-labelled metadata and `schedulerName` (first in the spec) only under a
/// gang scheduler (render-pipeline.md §5.1).
fn pod_template(gang: Option<&GangSchedulerSpec>, fields: Vec<(&str, Value)>) -> Value {
    let mut spec = Map::new();
    if let Some(g) = gang {
        spec.insert(
            "schedulerName".to_string(),
            Value::String(g.scheduler_name.clone()),
        );
    }
    spec.extend(fields.into_iter().map(|(k, v)| (k.to_string(), v)));
    let mut template = Map::new();
    if let Some(queue) = queue_label(gang) {
        template.insert(
            "metadata".to_string(),
            json!({"labels": label_map([queue])}),
        );
    }
    template.insert("spec".to_string(), Value::Object(spec));
    Value::Object(template)
}

/// The generated TrainingRuntime dependency `<run>-runtime` (render-pipeline.md §4.6), with the
/// gang scheduler injected per §5.1 and the KAI ordering rewrite of §5.2. `exec` reuses the torch
/// shape (framework label `torch`).
///
/// ```
/// use nvcre_domain::api::WorkloadRun;
/// use nvcre_domain::build::{build_runtime, BuildParams, DEFAULT_TIMEOUT_PER_JOB};
/// let run: WorkloadRun = serde_json::from_value(serde_json::json!({
///     "metadata": {"name": "demo"},
///     "spec": {"image": "img", "numNodes": 2, "framework": {"torch": {"script": "train.py"}}},
/// }))?;
/// let params = BuildParams {
///     gpus_per_node: 8,
///     base_env: vec![nvcre_domain::api::EnvVar::new("NCCL_DEBUG", "INFO")],
///     platform_mpi_args: vec![],
///     pre_command: vec![],
///     default_timeout_per_job: DEFAULT_TIMEOUT_PER_JOB.to_string(),
/// };
/// let runtime = build_runtime(&run, &params, &[], 2);
/// assert_eq!(runtime["metadata"]["name"], "demo-runtime");
/// assert_eq!(runtime["spec"]["mlPolicy"]["torch"]["numProcPerNode"], 8);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn build_runtime(
    run: &WorkloadRun,
    params: &BuildParams,
    merged_env: &[EnvVar],
    nodes_per_job: i64,
) -> Value {
    let gang = run
        .spec
        .gang_scheduler
        .as_ref()
        .and_then(GangSchedulerSpec::resolved);
    match run.spec.framework.kind() {
        FrameworkType::Mpi => mpi_runtime(run, params, merged_env, gang.as_ref()),
        FrameworkType::Torch | FrameworkType::Exec => {
            torch_runtime(run, params, merged_env, nodes_per_job, gang.as_ref())
        }
    }
}

/// Runtime metadata: `<run>-runtime`, labels `app` and the framework label.
fn runtime_metadata(run_name: &str, framework: &str) -> Value {
    json!({
        "name": format!("{run_name}-runtime"),
        "labels": label_map([(FRAMEWORK_LABEL, framework), ("app", run_name)]),
    })
}

/// The torch/exec TrainingRuntime: one replicated job `node`.
fn torch_runtime(
    run: &WorkloadRun,
    params: &BuildParams,
    merged_env: &[EnvVar],
    nodes_per_job: i64,
    gang: Option<&GangSchedulerSpec>,
) -> Value {
    let name = run.metadata.name.as_str();
    let (user_vols, user_mounts) = user_volumes(run);
    let mut volumes = vec![json!({"name": "dshm", "emptyDir": {"medium": "Memory"}})];
    volumes.extend(user_vols);
    let mut mounts = vec![json!({"name": "dshm", "mountPath": "/dev/shm"})];
    mounts.extend(user_mounts);
    let container = json!({
        "name": "node",
        "image": run.spec.image,
        "env": merged_env,
        "resources": worker_resources(run.spec.resources.as_ref(), params.gpus_per_node),
        "volumeMounts": mounts,
    });
    let mut fields = vec![
        ("terminationGracePeriodSeconds", json!(30)),
        (
            "securityContext",
            json!({"seccompProfile": {"type": "RuntimeDefault"}}),
        ),
    ];
    if !run.spec.init_containers.is_empty() {
        fields.push(("initContainers", json!(run.spec.init_containers)));
    }
    fields.push(("containers", json!([container])));
    fields.push(("volumes", json!(volumes)));
    let job_labels = label_map(
        [(ANCESTOR_STEP_LABEL, "trainer"), ("app", name)]
            .into_iter()
            .chain(queue_label(gang)),
    );
    let node = replicated_job("node", None, Some(job_labels), pod_template(gang, fields));
    json!({
        "apiVersion": TRAINER_API_VERSION,
        "kind": "TrainingRuntime",
        "metadata": runtime_metadata(name, "torch"),
        "spec": {
            "mlPolicy": {
                "numNodes": nodes_per_job,
                "torch": {"numProcPerNode": params.gpus_per_node},
            },
            "template": {"spec": {"replicatedJobs": [node]}},
        },
    })
}

/// Copies the Trainer's ssh material from the read-only secret mount into `/root/.ssh` with the
/// modes sshd insists on.
const SSH_KEY_COPY: &str = "mkdir -p /root/.ssh
cp /tmp/mpi-ssh-raw/* /root/.ssh/
chmod 700 /root/.ssh
chmod 600 /root/.ssh/*
for f in /root/.ssh/*.pub /root/.ssh/authorized_keys; do
  if [ -e \"$f\" ]; then chmod 644 \"$f\"; fi
done";

/// The worker's `sh -c` bootstrap: sshd (installed only when missing), keys, then sshd in the
/// foreground.
fn worker_bootstrap_script() -> String {
    format!(
        "set -e
if [ ! -x /usr/sbin/sshd ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openssh-server
fi
mkdir -p /var/run/sshd
{SSH_KEY_COPY}
ssh-keygen -A
exec /usr/sbin/sshd -De"
    )
}

/// ssh options for unattended loopback and worker probes.
const SSH_PROBE_OPTIONS: &str = "-o BatchMode=yes -o StrictHostKeyChecking=no \
-o UserKnownHostsFile=/dev/null -o ConnectTimeout=5";

/// The launcher's `fix-ssh-permissions` script; under KAI it then waits for every worker in
/// `/etc/mpi/hostfile` but itself to accept ssh (render-pipeline.md §5.2).
fn launcher_init_script(kai: bool) -> String {
    let mut script = format!("set -e\n{SSH_KEY_COPY}");
    if kai {
        script.push_str(&format!(
            "
# kai-scheduler: the launcher has no dependsOn on the workers (KAI refuses a PodGroup with an
# empty sub-group), so wait here until every worker accepts ssh.
if [ ! -r /etc/mpi/hostfile ]; then
  echo \"fix-ssh-permissions: /etc/mpi/hostfile is missing, so the workers cannot be awaited\" >&2
  exit 1
fi
self=$(hostname 2>/dev/null || cat /proc/sys/kernel/hostname)
hosts=\"\"
for h in $(awk '{{print $1}}' /etc/mpi/hostfile); do
  h=${{h%%:*}}
  if [ \"$h\" != \"$self\" ] && [ \"${{h%%.*}}\" != \"$self\" ]; then hosts=\"$hosts $h\"; fi
done
tries=0
while :; do
  pending=\"\"
  for h in $hosts; do
    if ! ssh {SSH_PROBE_OPTIONS} \"$h\" true >/dev/null 2>&1; then pending=\"$pending $h\"; fi
  done
  if [ -z \"$pending\" ]; then break; fi
  tries=$((tries + 1))
  if [ \"$tries\" -ge {KAI_WAIT_TRIES} ]; then
    echo \"fix-ssh-permissions: worker(s)$pending did not accept ssh after {KAI_WAIT_TRIES} tries {KAI_WAIT_SLEEP_SECONDS}s apart. Under kai-scheduler the launcher starts without waiting for the workers to be Ready, so it waits for them here; check that the worker pods were scheduled and that sshd runs in them.\" >&2
    exit 1
  fi
  sleep {KAI_WAIT_SLEEP_SECONDS}
done"
        ));
    }
    script
}

/// The MPI TrainingRuntime: worker `node` (sshd) and `launcher` (mpirun).
fn mpi_runtime(
    run: &WorkloadRun,
    params: &BuildParams,
    merged_env: &[EnvVar],
    gang: Option<&GangSchedulerSpec>,
) -> Value {
    let name = run.metadata.name.as_str();
    let image = run.spec.image.as_str();
    let kai = gang.is_some_and(|g| g.scheduler_name == KAI_SCHEDULER);
    let ssh_auth_mount =
        json!({"name": "mpi-ssh-auth", "mountPath": SSH_RAW_PATH, "readOnly": true});
    let ssh_keys_mount = json!({"name": "ssh-keys", "mountPath": "/root/.ssh"});

    let (user_vols, user_mounts) = user_volumes(run);
    let mut worker_volumes = vec![json!({"name": "dshm", "emptyDir": {"medium": "Memory"}})];
    worker_volumes.extend(user_vols);
    let mut worker_mounts = vec![
        ssh_auth_mount.clone(),
        json!({"name": "dshm", "mountPath": "/dev/shm"}),
    ];
    worker_mounts.extend(user_mounts);
    let probe: Vec<String> = std::iter::once("ssh")
        .chain(SSH_PROBE_OPTIONS.split(' '))
        .chain(["127.0.0.1", "true"])
        .map(str::to_string)
        .collect();
    let worker_container = json!({
        "name": "node",
        "image": image,
        "command": ["sh", "-c", worker_bootstrap_script()],
        "env": merged_env,
        "resources": worker_resources(run.spec.resources.as_ref(), params.gpus_per_node),
        "securityContext": {"capabilities": {"add": ["IPC_LOCK", "SYS_CHROOT"]}},
        "readinessProbe": {
            "exec": {"command": probe},
            "initialDelaySeconds": 5,
            "periodSeconds": 30,
            "timeoutSeconds": 10,
        },
        "volumeMounts": worker_mounts,
    });
    let worker = replicated_job(
        "node",
        None,
        queue_label(gang).map(|q| label_map([q])),
        pod_template(
            gang,
            vec![
                ("restartPolicy", json!("OnFailure")),
                ("containers", json!([worker_container])),
                ("volumes", json!(worker_volumes)),
            ],
        ),
    );

    let mut init_mounts = vec![ssh_auth_mount.clone(), ssh_keys_mount.clone()];
    if kai {
        init_mounts
            .push(json!({"name": "mpi-hostfile", "mountPath": "/etc/mpi", "readOnly": true}));
    }
    let init = json!({
        "name": "fix-ssh-permissions",
        "image": image,
        "command": ["sh", "-c", launcher_init_script(kai)],
        "volumeMounts": init_mounts,
    });
    let launcher_container = json!({
        "name": "node",
        "image": image,
        "env": merged_env,
        "resources": {"limits": {"cpu": "2", "memory": "1Gi"}},
        "volumeMounts": [ssh_auth_mount, ssh_keys_mount],
    });
    let launcher = replicated_job(
        "launcher",
        (!kai).then(|| json!([{"name": "node", "status": "Ready"}])),
        Some(label_map(
            std::iter::once((ANCESTOR_STEP_LABEL, "trainer")).chain(queue_label(gang)),
        )),
        pod_template(
            gang,
            vec![
                ("restartPolicy", json!("OnFailure")),
                ("initContainers", json!([init])),
                ("containers", json!([launcher_container])),
                ("volumes", json!([{"name": "ssh-keys", "emptyDir": {}}])),
            ],
        ),
    );
    json!({
        "apiVersion": TRAINER_API_VERSION,
        "kind": "TrainingRuntime",
        "metadata": runtime_metadata(name, "mpi"),
        "spec": {
            "mlPolicy": {
                "numNodes": 1,
                "mpi": {
                    "mpiImplementation": "OpenMPI",
                    "numProcPerNode": params.gpus_per_node,
                    "sshAuthMountPath": SSH_RAW_PATH,
                },
            },
            "template": {"spec": {
                "network": {"publishNotReadyAddresses": true},
                "successPolicy": {"operator": "All", "targetReplicatedJobs": ["launcher"]},
                "replicatedJobs": [worker, launcher],
            }},
        },
    })
}

/// The trainer command and args by framework (render-pipeline.md §4.4), before any wrapping.
fn trainer_command(
    spec: &WorkloadRunSpec,
    params: &BuildParams,
    merged_env: &[EnvVar],
) -> (Vec<String>, Vec<String>) {
    let fw = &spec.framework;
    if let Some(torch) = &fw.torch {
        let mut args = match (torch.script.as_deref(), torch.module.as_deref()) {
            (Some(script), _) if !script.is_empty() => vec![script.to_string()],
            (_, Some(module)) if !module.is_empty() => vec!["-m".to_string(), module.to_string()],
            _ => Vec::new(),
        };
        args.extend(torch.args.iter().cloned());
        return (vec!["torchrun".to_string()], args);
    }
    if let Some(mpi) = &fw.mpi {
        let mpi_args: Vec<String> = params
            .platform_mpi_args
            .iter()
            .chain(&mpi.mpi_args)
            .cloned()
            .collect();
        let command = vec![
            "timeout".to_string(),
            MPI_TIMEOUT_SECONDS.to_string(),
            mpi.mpirun_path.clone(),
        ];
        let args = layout_mpirun_args(
            params.gpus_per_node,
            merged_env,
            &mpi_args,
            &mpi.binary,
            &mpi.args,
        );
        return (command, args);
    }
    match &fw.exec {
        Some(exec) => (exec.command.clone(), exec.args.clone()),
        None => (Vec::new(), Vec::new()),
    }
}

/// The controller-owned runtimePatch: pull secrets on `node` (and on `launcher`, which pulls the
/// same image: newer builds per workloadrun-api.md §1), and for MPI bare `node` and `launcher`
/// entries; `None` when there is nothing to register.
fn controller_runtime_patch(spec: &WorkloadRunSpec) -> Option<Value> {
    let mpi = spec.framework.kind() == FrameworkType::Mpi;
    let mut jobs = Vec::new();
    if !spec.image_pull_secrets.is_empty() {
        jobs.push(json!({
            "name": "node",
            "template": {"spec": {"template": {"spec": {
                "imagePullSecrets": spec.image_pull_secrets,
            }}}},
        }));
    } else if mpi {
        jobs.push(json!({"name": "node"}));
    }
    if mpi && !spec.image_pull_secrets.is_empty() {
        jobs.push(json!({
            "name": "launcher",
            "template": {"spec": {"template": {"spec": {
                "imagePullSecrets": spec.image_pull_secrets,
            }}}},
        }));
    } else if mpi {
        jobs.push(json!({"name": "launcher"}));
    }
    if jobs.is_empty() {
        return None;
    }
    Some(json!({
        "manager": CONTROLLER_MANAGER,
        "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": jobs}}},
    }))
}

/// `jobTemplate.spec` (workloadrun-api.md §4.2).
fn job_spec(run: &WorkloadRun, params: &BuildParams, merged_env: &[EnvVar], npj: i64) -> Value {
    let spec = &run.spec;
    let name = run.metadata.name.as_str();
    let (mut command, mut args) = trainer_command(spec, params, merged_env);
    if !params.pre_command.is_empty() {
        (command, args) = wrap_pre_command(&params.pre_command, &command, &args);
    }
    let mut trainer = Map::new();
    trainer.insert("image".to_string(), json!(spec.image));
    trainer.insert("command".to_string(), json!(command));
    if !args.is_empty() {
        trainer.insert("args".to_string(), json!(args));
    }
    trainer.insert("numNodes".to_string(), json!(npj));
    trainer.insert("numProcPerNode".to_string(), json!(params.gpus_per_node));
    let mut train_job = Map::new();
    train_job.insert(
        "runtimeRef".to_string(),
        json!({"name": format!("{name}-runtime"), "kind": "TrainingRuntime"}),
    );
    train_job.insert("trainer".to_string(), Value::Object(trainer));
    if let Some(patch) = controller_runtime_patch(spec) {
        train_job.insert("runtimePatches".to_string(), json!([patch]));
    }

    let mut job = Map::new();
    job.insert("workload".to_string(), json!({"trainJob": train_job}));
    if let Some(meta) = spec
        .workload_metadata
        .as_ref()
        .filter(|m| !m.labels.is_empty())
    {
        job.insert(
            "workloadMetadata".to_string(),
            json!({"labels": meta.labels}),
        );
    }
    job.insert(
        "nodeHealthMonitor".to_string(),
        json!({"cel": {"expression": NODE_HEALTH_EXPRESSION}}),
    );
    if let Some(goodput) = &spec.goodput_measurement {
        job.insert("goodputMeasurement".to_string(), goodput.clone());
    }
    if let Some(bandwidth) = &spec.bandwidth_measurement {
        job.insert("bandwidthMeasurement".to_string(), bandwidth.clone());
    }
    if let Some(checkpoint) = &spec.checkpoint {
        job.insert(
            "checkpoint".to_string(),
            json!({
                "pvcName": format!("{name}-checkpoint-pvc"),
                "maxRestarts": checkpoint.max_restarts.unwrap_or(0),
            }),
        );
    }
    Value::Object(job)
}

/// The ConfigMap and PVC dependencies (render-pipeline.md §1.2 step 11).
fn extra_dependencies(run: &WorkloadRun) -> Vec<Value> {
    let name = run.metadata.name.as_str();
    let mut deps = Vec::new();
    if let Some(inline) = run
        .spec
        .config
        .as_ref()
        .and_then(|c| c.inline.as_ref())
        .filter(|m| !m.is_empty())
    {
        deps.push(json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": format!("{name}-config"), "labels": {"app": name}},
            "data": inline,
        }));
    }
    if let Some(checkpoint) = &run.spec.checkpoint {
        let mut pvc = Map::new();
        pvc.insert("accessModes".to_string(), json!(["ReadWriteMany"]));
        pvc.insert(
            "resources".to_string(),
            json!({"requests": {"storage": checkpoint.storage_size}}),
        );
        if let Some(class) = &checkpoint.storage_class_name {
            pvc.insert("storageClassName".to_string(), json!(class));
        }
        deps.push(json!({
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": format!("{name}-checkpoint-pvc"), "labels": {"app": name}},
            "spec": pvc,
        }));
    }
    deps
}

/// `spec.orchestration` of the Workflow (render-pipeline.md §1.2 step 12), keys in the Go struct
/// order: target, topology, execution, iterations, placement.
fn orchestration(
    spec: &WorkloadRunSpec,
    params: &BuildParams,
) -> Result<Map<String, Value>, BuildError> {
    let orch = spec.orchestration.as_ref();
    let timeout = match orch.and_then(|o| o.timeout_per_job.as_deref()) {
        None | Some("") => params.default_timeout_per_job.clone(),
        Some(value) => {
            canonical_go_duration(value).map_err(|reason| BuildError::InvalidTimeoutPerJob {
                value: value.to_string(),
                reason,
            })?
        }
    };
    let mut out = Map::new();
    if let Some(target) = &spec.target {
        out.insert("target".to_string(), json!(target));
    }
    if orch.and_then(|o| o.test_scale.as_deref()) == Some("intra-rack") {
        out.insert("topology".to_string(), json!({"strictDomain": true}));
    }
    let mut execution = Map::new();
    if let Some(max) = orch.and_then(|o| o.max_concurrent) {
        execution.insert("maxConcurrent".to_string(), json!(max));
    }
    execution.insert("timeoutPerJob".to_string(), json!(timeout));
    out.insert("execution".to_string(), Value::Object(execution));
    out.insert(
        "iterations".to_string(),
        json!(orch.and_then(|o| o.repeat_count).unwrap_or(1)),
    );
    if let Some(placement) = orch
        .and_then(|o| o.placement.as_deref())
        .filter(|p| !p.is_empty())
    {
        out.insert("placement".to_string(), json!(placement));
    }
    Ok(out)
}

/// Refuses threshold keys outside [`VALID_THRESHOLD_KEYS`].
fn check_thresholds(name: &str, spec: &WorkloadRunSpec) -> Result<(), BuildError> {
    let keys: Vec<String> = spec
        .thresholds
        .keys()
        .filter(|k| !VALID_THRESHOLD_KEYS.contains(&k.as_str()))
        .cloned()
        .collect();
    if keys.is_empty() {
        return Ok(());
    }
    Err(BuildError::UnknownThresholdKeys {
        name: name.to_string(),
        keys,
    })
}

/// Builds the Workflow for a WorkloadRun (render-pipeline.md §1.2): the TrainJob job template,
/// the TrainingRuntime / ConfigMap / PVC dependencies, orchestration, validation and the resolved
/// gang intent. `spec.overrides` is left empty for the caller; the gang queue label on the
/// workload object is added later by a rule pack.
///
/// Checks, in order: threshold keys, a framework is set, `timeoutPerJob` parses.
///
/// ```
/// use nvcre_domain::api::WorkloadRun;
/// use nvcre_domain::build::{build_workflow, BuildParams, DEFAULT_TIMEOUT_PER_JOB};
/// let run: WorkloadRun = serde_json::from_value(serde_json::json!({
///     "metadata": {"name": "demo", "namespace": "team"},
///     "spec": {"image": "img", "numNodes": 2,
///              "framework": {"exec": {"command": ["python", "run.py"]}}},
/// }))?;
/// let params = BuildParams {
///     gpus_per_node: 4,
///     base_env: vec![nvcre_domain::api::EnvVar::new("NCCL_DEBUG", "INFO")],
///     platform_mpi_args: vec![],
///     pre_command: vec![],
///     default_timeout_per_job: DEFAULT_TIMEOUT_PER_JOB.to_string(),
/// };
/// let wf = build_workflow(&run, &params)?;
/// assert_eq!(wf.metadata.namespace.as_deref(), Some("team"));
/// assert_eq!(wf.spec.orchestration["execution"]["timeoutPerJob"], "24h0m0s");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn build_workflow(run: &WorkloadRun, params: &BuildParams) -> Result<Workflow, BuildError> {
    let name = run.metadata.name.as_str();
    let spec = &run.spec;
    check_thresholds(name, spec)?;
    let fw = &spec.framework;
    if fw.torch.is_none() && fw.mpi.is_none() && fw.exec.is_none() {
        return Err(BuildError::NoFramework {
            name: name.to_string(),
        });
    }
    let orchestration = orchestration(spec, params)?;
    let merged = merge_env(&params.base_env, &spec.env);
    let npj = nodes_per_job(spec);

    let mut dependencies = vec![build_runtime(run, params, &merged, npj)];
    dependencies.extend(extra_dependencies(run));
    let validation = (!spec.thresholds.is_empty()).then(
        || json!({"performance": {"enabled": true, "thresholds": {"thresholds": spec.thresholds}}}),
    );
    let labels = BTreeMap::from([
        (MANAGED_BY_LABEL.to_string(), MANAGED_BY_VALUE.to_string()),
        (WORKLOAD_RUN_LABEL.to_string(), name.to_string()),
    ]);
    Ok(Workflow {
        api_version: API_VERSION.to_string(),
        kind: "Workflow".to_string(),
        metadata: ObjectMeta {
            name: name.to_string(),
            namespace: run.metadata.namespace.clone(),
            labels,
            annotations: BTreeMap::new(),
        },
        spec: WorkflowSpec {
            namespace: None,
            job_template: json!({"spec": job_spec(run, params, &merged, npj)}),
            orchestration,
            dependencies,
            overrides: Vec::new(),
            validation,
            gang_scheduler: spec
                .gang_scheduler
                .as_ref()
                .and_then(GangSchedulerSpec::resolved),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shipped base env (rules/defaults/nccl-env.yaml).
    fn base_nccl_env(mnnvl: bool) -> Vec<EnvVar> {
        crate::detect::base_nccl_env(&crate::packs::default_rules().unwrap(), mnnvl).unwrap()
    }

    fn params() -> BuildParams {
        BuildParams {
            gpus_per_node: 8,
            base_env: base_nccl_env(false),
            platform_mpi_args: Vec::new(),
            pre_command: Vec::new(),
            default_timeout_per_job: DEFAULT_TIMEOUT_PER_JOB.to_string(),
        }
    }

    fn run(value: Value) -> WorkloadRun {
        serde_json::from_value(value).unwrap()
    }

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    /// The seed all-reduce example (seeds/000, 002), with optional extra spec fields.
    fn all_reduce(extra: Value) -> WorkloadRun {
        let mut spec = json!({
            "image": "nvcr.io/nvidia/pytorch:26.01-py3",
            "framework": {"mpi": {
                "binary": "/usr/local/bin/all_reduce_perf_mpi",
                "args": ["-b", "8", "-e", "32G", "-f", "2", "-n", "100"],
                "mpirunPath": "/usr/local/mpi/bin/mpirun",
            }},
            "numNodes": 4,
        });
        if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
            s.extend(e.clone());
        }
        run(json!({"metadata": {"name": "nccl-all-reduce"}, "spec": spec}))
    }

    fn names(env: &[EnvVar]) -> Vec<String> {
        env.iter()
            .map(|e| format!("{}={}", e.name, e.value.as_deref().unwrap_or("<from>")))
            .collect()
    }

    const BASE_MNNVL_OFF: [&str; 20] = [
        "-x",
        "NCCL_DEBUG=INFO",
        "-x",
        "NCCL_DEBUG_SUBSYS=NET,INIT",
        "-x",
        "NCCL_NVLS_ENABLE=1",
        "-x",
        "NCCL_CUMEM_ENABLE=1",
        "-x",
        "NCCL_NET_GDR_C2C=1",
        "-x",
        "NCCL_NET_GDR_LEVEL=PHB",
        "-x",
        "NCCL_P2P_NET_CHUNKSIZE=2097152",
        "-x",
        "NCCL_SHM_DISABLE=1",
        "-x",
        "NCCL_MNNVL_ENABLE=0",
        "-x",
        "NCCL_SOCKET_IFNAME=eth0",
    ];

    // ---- Go duration: one line per case -------------------------------------------------------
    macro_rules! duration {
        ($name:ident, $input:expr, ok $want:expr) => {
            #[test]
            fn $name() {
                assert_eq!(canonical_go_duration($input), Ok($want.to_string()));
            }
        };
        ($name:ident, $input:expr, err $want:expr) => {
            #[test]
            fn $name() {
                assert_eq!(canonical_go_duration($input), Err($want));
            }
        };
    }
    duration!(dur_90m, "90m", ok "1h30m0s");
    duration!(dur_24h, "24h", ok "24h0m0s");
    duration!(dur_1h30m, "1h30m", ok "1h30m0s");
    duration!(dur_90s, "90s", ok "1m30s");
    duration!(dur_frac_hours, "1.5h", ok "1h30m0s");
    duration!(dur_300ms, "300ms", ok "300ms");
    duration!(dur_half_second, "0.5s", ok "500ms");
    duration!(dur_micro, "1500ns", ok "1.5\u{b5}s");
    duration!(dur_micro_alias, "2us", ok "2\u{b5}s");
    duration!(dur_nanos, "7ns", ok "7ns");
    duration!(dur_zero, "0", ok "0s");
    duration!(dur_neg_zero, "-0s", ok "0s");
    duration!(dur_plus, "+1m", ok "1m0s");
    duration!(dur_frac_secs, "1.25s", ok "1.25s");
    duration!(dur_dot_only_frac, ".5m", ok "30s");
    duration!(dur_sum, "1h1h", ok "2h0m0s");
    duration!(dur_max, "2562047h47m16.854775807s", ok "2562047h47m16.854775807s");
    duration!(dur_bogus, "bogus", err DurationError::Syntax);
    duration!(dur_empty, "", err DurationError::Syntax);
    duration!(dur_dot, ".s", err DurationError::Syntax);
    duration!(dur_no_unit, "90", err DurationError::MissingUnit);
    duration!(dur_unknown_unit, "3d", err DurationError::UnknownUnit { unit: "d".to_string() });
    duration!(dur_negative, "-5m", err DurationError::Negative);
    duration!(dur_overflow, "2562048h", err DurationError::Overflow);

    // ---- Go %q quoting: one line per case -----------------------------------------------------
    macro_rules! quote {
        ($name:ident, $input:expr, $want:expr) => {
            #[test]
            fn $name() {
                assert_eq!(go_quote($input), $want);
            }
        };
    }
    quote!(q_plain, "timeout", r#""timeout""#);
    quote!(q_space, "-o A -o B", r#""-o A -o B""#);
    quote!(q_double_quote, r#"say "hi""#, r#""say \"hi\"""#);
    quote!(q_backslash, r"a\b", r#""a\\b""#);
    quote!(q_newline_tab, "a\nb\tc", r#""a\nb\tc""#);
    quote!(q_bell_vt, "\u{7}\u{b}", r#""\a\v""#);
    quote!(q_escape, "\u{1b}[0m", r#""\x1b[0m""#);
    quote!(q_del, "\u{7f}", r#""\x7f""#);
    quote!(q_nbsp, "a\u{a0}b", r#""a\u00a0b""#);
    quote!(q_soft_hyphen, "\u{ad}", r#""\u00ad""#);
    quote!(q_latin1_printable, "café", r#""café""#);
    quote!(q_cjk, "日本", r#""日本""#);
    quote!(q_zero_width, "\u{200b}", r#""\u200b""#);
    quote!(q_emoji, "🚀", r#""🚀""#);
    quote!(q_tag_char, "\u{e0041}", r#""\U000e0041""#);
    quote!(q_dollar_kept, "$HOME", r#""$HOME""#);

    // ---- env ----------------------------------------------------------------------------------
    #[test]
    fn base_env_order_mnnvl_on() {
        assert_eq!(
            names(&base_nccl_env(true)),
            [
                "NCCL_DEBUG=INFO",
                "NCCL_DEBUG_SUBSYS=NET,INIT",
                "NCCL_NVLS_ENABLE=1",
                "NCCL_CUMEM_ENABLE=1",
                "NCCL_NET_GDR_C2C=1",
                "NCCL_NET_GDR_LEVEL=PHB",
                "NCCL_P2P_NET_CHUNKSIZE=2097152",
                "NCCL_SHM_DISABLE=1",
                "NCCL_MNNVL_ENABLE=1",
                "NCCL_SOCKET_IFNAME=eth0",
            ]
        );
    }

    #[test]
    fn merge_moves_user_override_to_the_end() {
        let user = [
            EnvVar::new("NCCL_SHM_DISABLE", "0"),
            EnvVar::new("MY_VAR", "x"),
        ];
        assert_eq!(
            names(&merge_env(&base_nccl_env(false), &user)),
            [
                "NCCL_DEBUG=INFO",
                "NCCL_DEBUG_SUBSYS=NET,INIT",
                "NCCL_NVLS_ENABLE=1",
                "NCCL_CUMEM_ENABLE=1",
                "NCCL_NET_GDR_C2C=1",
                "NCCL_NET_GDR_LEVEL=PHB",
                "NCCL_P2P_NET_CHUNKSIZE=2097152",
                "NCCL_MNNVL_ENABLE=0",
                "NCCL_SOCKET_IFNAME=eth0",
                "NCCL_SHM_DISABLE=0",
                "MY_VAR=x",
            ]
        );
    }

    // ---- -x forwarding: one line per case -----------------------------------------------------
    macro_rules! forward {
        ($name:ident, env [$($env:expr),*], mpi_args [$($arg:expr),*], want [$($want:expr),*]) => {
            #[test]
            fn $name() {
                let env: Vec<EnvVar> = vec![$($env),*];
                let mpi_args: Vec<String> = strings(&[$($arg),*]);
                let want: Vec<String> = strings(&[$($want),*]);
                assert_eq!(mpi_env_args(&env, &mpi_args), want);
            }
        };
    }
    fn secret_var(name: &str) -> EnvVar {
        EnvVar {
            name: name.to_string(),
            value: None,
            value_from: Some(json!({"secretKeyRef": {"name": "s", "key": "k"}})),
        }
    }
    forward!(fwd_all, env [EnvVar::new("A", "1"), EnvVar::new("B", "2")], mpi_args [], want ["-x", "A=1", "-x", "B=2"]);
    forward!(fwd_skip_name_value, env [EnvVar::new("A", "1"), EnvVar::new("B", "2")], mpi_args ["-x", "A=9"], want ["-x", "B=2"]);
    forward!(fwd_skip_bare_name, env [EnvVar::new("A", "1"), EnvVar::new("B", "2")], mpi_args ["--mca", "x", "-x", "B"], want ["-x", "A=1"]);
    forward!(fwd_value_from_bare, env [secret_var("TOKEN"), EnvVar::new("A", "1")], mpi_args [], want ["-x", "TOKEN", "-x", "A=1"]);
    forward!(fwd_operand_not_flag, env [EnvVar::new("A", "1")], mpi_args ["A=1"], want ["-x", "A=1"]);
    forward!(fwd_trailing_x, env [EnvVar::new("A", "1")], mpi_args ["-x"], want ["-x", "A=1"]);
    forward!(fwd_prefix_name_not_skipped, env [EnvVar::new("AB", "1")], mpi_args ["-x", "A=1"], want ["-x", "AB=1"]);
    forward!(fwd_empty_value, env [EnvVar { name: "E".to_string(), value: None, value_from: None }], mpi_args [], want ["-x", "E="]);

    #[test]
    fn mpirun_args_of_the_seed_all_reduce_example() {
        let merged = merge_env(&base_nccl_env(false), &[]);
        let mpi_args = strings(&["-x", "NCCL_NET_PLUGIN=none"]);
        let args = layout_mpirun_args(
            8,
            &merged,
            &mpi_args,
            "/usr/local/bin/all_reduce_perf_mpi",
            &strings(&["-b", "8", "-e", "32G", "-f", "2", "-n", "100"]),
        );
        let mut want = strings(&[
            "-N",
            "8",
            "--allow-run-as-root",
            "--mca",
            "plm_rsh_args",
            "-o StrictHostKeyChecking=no -o ConnectionAttempts=10",
        ]);
        want.extend(strings(&BASE_MNNVL_OFF));
        want.extend(strings(&[
            "-x",
            "NCCL_NET_PLUGIN=none",
            "/usr/local/bin/all_reduce_perf_mpi",
            "-b",
            "8",
            "-e",
            "32G",
            "-f",
            "2",
            "-n",
            "100",
        ]));
        assert_eq!(args, want);
    }

    #[test]
    fn platform_args_precede_user_args_and_user_x_wins() {
        let wr = all_reduce(json!({
            "env": [{"name": "NCCL_DEBUG", "value": "TRACE"}],
            "framework": {"mpi": {
                "binary": "/b",
                "mpirunPath": "/mpirun",
                "mpiArgs": ["-x", "NCCL_DEBUG=WARN", "--bind-to", "none"],
            }},
        }));
        let p = BuildParams {
            platform_mpi_args: strings(&["-x", "NCCL_NET_PLUGIN=none"]),
            ..params()
        };
        let wf = build_workflow(&wr, &p).unwrap();
        let trainer = &wf.spec.job_template["spec"]["workload"]["trainJob"]["trainer"];
        let args: Vec<String> = serde_json::from_value(trainer["args"].clone()).unwrap();
        let tail: Vec<&str> = args.iter().skip(6).map(String::as_str).collect();
        let mut want: Vec<&str> = BASE_MNNVL_OFF.iter().skip(2).copied().collect();
        want.extend([
            "-x",
            "NCCL_NET_PLUGIN=none",
            "-x",
            "NCCL_DEBUG=WARN",
            "--bind-to",
            "none",
            "/b",
        ]);
        assert_eq!(tail, want);
        assert_eq!(trainer["command"], json!(["timeout", "3600", "/mpirun"]));
    }

    #[test]
    fn pre_command_wraps_the_mpi_trainer() {
        let wr = all_reduce(json!({}));
        let p = BuildParams {
            platform_mpi_args: strings(&["-x", "NCCL_NET_PLUGIN=none"]),
            pre_command: strings(&["rm -rf /opt/amazon", "unset NCCL_NET_PLUGIN"]),
            ..params()
        };
        let wf = build_workflow(&wr, &p).unwrap();
        let trainer = &wf.spec.job_template["spec"]["workload"]["trainJob"]["trainer"];
        let mut want = String::from(
            "rm -rf /opt/amazon\nunset NCCL_NET_PLUGIN\nexec \"timeout\" \"3600\" \
             \"/usr/local/mpi/bin/mpirun\" \"-N\" \"8\" \"--allow-run-as-root\" \"--mca\" \
             \"plm_rsh_args\" \"-o StrictHostKeyChecking=no -o ConnectionAttempts=10\"",
        );
        for a in BASE_MNNVL_OFF {
            want.push_str(&format!(" \"{a}\""));
        }
        want.push_str(
            " \"-x\" \"NCCL_NET_PLUGIN=none\" \"/usr/local/bin/all_reduce_perf_mpi\" \
             \"-b\" \"8\" \"-e\" \"32G\" \"-f\" \"2\" \"-n\" \"100\"",
        );
        assert_eq!(trainer["command"], json!(["/bin/bash", "-c"]));
        assert_eq!(trainer["args"], json!([want]));
    }

    #[test]
    fn pre_command_quotes_like_go() {
        let (command, args) = wrap_pre_command(
            &strings(&["set -e"]),
            &strings(&["sh"]),
            &strings(&["-c", "echo \"a\\b\"\n"]),
        );
        assert_eq!(command, ["/bin/bash", "-c"]);
        assert_eq!(
            args,
            [r#"set -e
exec "sh" "-c" "echo \"a\\b\"\n""#]
        );
    }

    // ---- trainer by framework -----------------------------------------------------------------
    fn trainer_of(framework: Value) -> Value {
        let wr = run(json!({
            "metadata": {"name": "t"},
            "spec": {"image": "img", "numNodes": 2, "framework": framework},
        }));
        let wf = build_workflow(&wr, &params()).unwrap();
        wf.spec.job_template["spec"]["workload"]["trainJob"]["trainer"].clone()
    }

    #[test]
    fn torch_module_trainer() {
        assert_eq!(
            trainer_of(json!({"torch": {"module": "pkg.train", "args": ["--lr", "1"]}})),
            json!({
                "image": "img",
                "command": ["torchrun"],
                "args": ["-m", "pkg.train", "--lr", "1"],
                "numNodes": 2,
                "numProcPerNode": 8,
            })
        );
    }

    #[test]
    fn torch_script_trainer() {
        assert_eq!(
            trainer_of(json!({"torch": {"script": "train.py"}}))["args"],
            json!(["train.py"])
        );
    }

    #[test]
    fn exec_trainer_is_verbatim_and_omits_empty_args() {
        assert_eq!(
            trainer_of(json!({"exec": {"command": ["python", "-c", "print(1)"]}})),
            json!({
                "image": "img",
                "command": ["python", "-c", "print(1)"],
                "numNodes": 2,
                "numProcPerNode": 8,
            })
        );
    }

    // ---- resources: one line per case ---------------------------------------------------------
    macro_rules! resources {
        ($name:ident, $user:expr, $gpus:expr, $want:expr) => {
            #[test]
            fn $name() {
                let user: Option<Value> = $user;
                assert_eq!(worker_resources(user.as_ref(), $gpus), $want);
            }
        };
    }
    resources!(
        res_default,
        None,
        8,
        json!({"limits": {"nvidia.com/gpu": "8"}, "requests": {"nvidia.com/gpu": "8"}})
    );
    resources!(
        res_explicit_zero_kept,
        Some(json!({"limits": {"nvidia.com/gpu": 0}})),
        8,
        json!({"limits": {"nvidia.com/gpu": 0}})
    );
    resources!(
        res_requests_only_kept,
        Some(json!({"requests": {"nvidia.com/gpu": "2"}})),
        8,
        json!({"requests": {"nvidia.com/gpu": "2"}})
    );
    resources!(
        res_gpu_added,
        Some(json!({"limits": {"memory": "8Gi"}})),
        4,
        json!({"limits": {"memory": "8Gi", "nvidia.com/gpu": "4"}, "requests": {"nvidia.com/gpu": "4"}})
    );
    resources!(
        res_zero_gpus_nothing_added,
        Some(json!({"limits": {"memory": "8Gi"}})),
        0,
        json!({"limits": {"memory": "8Gi"}})
    );

    // ---- runtimes and gang labels -------------------------------------------------------------
    fn replicated(runtime: &Value, name: &str) -> Value {
        runtime["spec"]["template"]["spec"]["replicatedJobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["name"] == name)
            .cloned()
            .unwrap()
    }

    fn mpi_runtime_with(gang: Value) -> Value {
        let wr = all_reduce(json!({"gangScheduler": gang}));
        let merged = merge_env(&base_nccl_env(false), &[]);
        build_runtime(&wr, &params(), &merged, 4)
    }

    #[test]
    fn runai_mpi_labels_and_scheduler() {
        let rt = mpi_runtime_with(json!({
            "schedulerName": "runai-scheduler",
            "queueLabelKey": "runai/queue",
            "queue": "team-a",
        }));
        let launcher = replicated(&rt, "launcher");
        let worker = replicated(&rt, "node");
        assert_eq!(
            launcher["template"]["metadata"]["labels"],
            json!({"runai/queue": "team-a", "trainer.kubeflow.org/trainjob-ancestor-step": "trainer"})
        );
        assert_eq!(
            worker["template"]["metadata"]["labels"],
            json!({"runai/queue": "team-a"})
        );
        for job in [&launcher, &worker] {
            let pod = &job["template"]["spec"]["template"];
            assert_eq!(pod["metadata"]["labels"], json!({"runai/queue": "team-a"}));
            assert_eq!(pod["spec"]["schedulerName"], "runai-scheduler");
        }
        assert_eq!(
            launcher["dependsOn"],
            json!([{"name": "node", "status": "Ready"}])
        );
        assert!(!rt.to_string().contains("kai.scheduler/queue"));
    }

    #[test]
    fn kai_mpi_labels_wait_loop_and_no_depends_on() {
        let rt =
            mpi_runtime_with(json!({"schedulerName": "kai-scheduler", "queue": "high-priority"}));
        let launcher = replicated(&rt, "launcher");
        let worker = replicated(&rt, "node");
        assert_eq!(
            launcher["template"]["metadata"]["labels"],
            json!({"kai.scheduler/queue": "high-priority", "trainer.kubeflow.org/trainjob-ancestor-step": "trainer"})
        );
        assert_eq!(
            worker["template"]["metadata"]["labels"],
            json!({"kai.scheduler/queue": "high-priority"})
        );
        assert_eq!(launcher.get("dependsOn"), None);
        let init = &launcher["template"]["spec"]["template"]["spec"]["initContainers"][0];
        assert_eq!(init["name"], "fix-ssh-permissions");
        assert_eq!(
            init["volumeMounts"],
            json!([
                {"name": "mpi-ssh-auth", "mountPath": "/tmp/mpi-ssh-raw", "readOnly": true},
                {"name": "ssh-keys", "mountPath": "/root/.ssh"},
                {"name": "mpi-hostfile", "mountPath": "/etc/mpi", "readOnly": true},
            ])
        );
        let script = init["command"][2].as_str().unwrap();
        assert!(script.contains("awk '{print $1}' /etc/mpi/hostfile"));
        assert!(script.contains("if [ \"$tries\" -ge 240 ]; then"));
        assert!(script.contains("sleep 5\n"));
    }

    #[test]
    fn mpi_without_gang_has_no_scheduling_fields() {
        let rt = mpi_runtime_with(Value::Null);
        let worker = replicated(&rt, "node");
        let launcher = replicated(&rt, "launcher");
        assert_eq!(worker["template"].get("metadata"), None);
        assert_eq!(worker["template"]["spec"]["template"].get("metadata"), None);
        assert_eq!(
            worker["template"]["spec"]["template"]["spec"].get("schedulerName"),
            None
        );
        assert_eq!(
            launcher["template"]["metadata"]["labels"],
            json!({"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"})
        );
        assert_eq!(
            launcher["dependsOn"],
            json!([{"name": "node", "status": "Ready"}])
        );
        let init = &launcher["template"]["spec"]["template"]["spec"]["initContainers"][0];
        assert!(!init["command"][2].as_str().unwrap().contains("hostfile"));
    }

    #[test]
    fn empty_scheduler_name_injects_nothing() {
        let rt = mpi_runtime_with(json!({"schedulerName": "", "queue": "q"}));
        assert_eq!(rt, mpi_runtime_with(Value::Null));
    }

    #[test]
    fn mpi_worker_and_launcher_shapes() {
        let rt = mpi_runtime_with(Value::Null);
        assert_eq!(
            rt["spec"]["mlPolicy"],
            json!({"numNodes": 1, "mpi": {"mpiImplementation": "OpenMPI", "numProcPerNode": 8, "sshAuthMountPath": "/tmp/mpi-ssh-raw"}})
        );
        assert_eq!(
            rt["metadata"]["labels"],
            json!({"app": "nccl-all-reduce", "trainer.kubeflow.org/framework": "mpi"})
        );
        let worker = replicated(&rt, "node")["template"]["spec"]["template"]["spec"].clone();
        assert_eq!(worker["restartPolicy"], "OnFailure");
        let c = &worker["containers"][0];
        assert_eq!(
            c["securityContext"],
            json!({"capabilities": {"add": ["IPC_LOCK", "SYS_CHROOT"]}})
        );
        assert_eq!(c["readinessProbe"]["initialDelaySeconds"], 5);
        assert_eq!(c["readinessProbe"]["periodSeconds"], 30);
        assert_eq!(c["readinessProbe"]["timeoutSeconds"], 10);
        assert_eq!(c["command"][0], "sh");
        assert!(
            c["command"][2]
                .as_str()
                .unwrap()
                .ends_with("exec /usr/sbin/sshd -De")
        );
        assert_eq!(
            c["env"][8],
            json!({"name": "NCCL_MNNVL_ENABLE", "value": "0"})
        );
        let launcher = replicated(&rt, "launcher")["template"]["spec"]["template"]["spec"].clone();
        assert_eq!(
            launcher["containers"],
            json!([{
                "name": "node",
                "image": "nvcr.io/nvidia/pytorch:26.01-py3",
                "env": c["env"],
                "resources": {"limits": {"cpu": "2", "memory": "1Gi"}},
                "volumeMounts": [
                    {"name": "mpi-ssh-auth", "mountPath": "/tmp/mpi-ssh-raw", "readOnly": true},
                    {"name": "ssh-keys", "mountPath": "/root/.ssh"},
                ],
            }])
        );
        assert_eq!(
            launcher["volumes"],
            json!([{"name": "ssh-keys", "emptyDir": {}}])
        );
    }

    #[test]
    fn torch_runtime_full_shape_under_kai() {
        let wr = run(json!({
            "metadata": {"name": "wr"},
            "spec": {
                "image": "img",
                "numNodes": 2,
                "framework": {"torch": {"script": "train.py"}},
                "gangScheduler": {"schedulerName": "kai-scheduler"},
                "config": {"inline": {"a.yaml": "x: 1"}},
                "initContainers": [{"name": "prep", "image": "busybox"}],
            },
        }));
        let env = [EnvVar::new("A", "1")];
        assert_eq!(
            build_runtime(&wr, &params(), &env, 2),
            json!({
                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                "kind": "TrainingRuntime",
                "metadata": {
                    "name": "wr-runtime",
                    "labels": {"app": "wr", "trainer.kubeflow.org/framework": "torch"},
                },
                "spec": {
                    "mlPolicy": {"numNodes": 2, "torch": {"numProcPerNode": 8}},
                    "template": {"spec": {"replicatedJobs": [{
                        "name": "node",
                        "template": {
                            "metadata": {"labels": {
                                "app": "wr",
                                "kai.scheduler/queue": "default-queue",
                                "trainer.kubeflow.org/trainjob-ancestor-step": "trainer",
                            }},
                            "spec": {"template": {
                                "metadata": {"labels": {"kai.scheduler/queue": "default-queue"}},
                                "spec": {
                                    "schedulerName": "kai-scheduler",
                                    "terminationGracePeriodSeconds": 30,
                                    "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                                    "initContainers": [{"name": "prep", "image": "busybox"}],
                                    "containers": [{
                                        "name": "node",
                                        "image": "img",
                                        "env": [{"name": "A", "value": "1"}],
                                        "resources": {
                                            "limits": {"nvidia.com/gpu": "8"},
                                            "requests": {"nvidia.com/gpu": "8"},
                                        },
                                        "volumeMounts": [
                                            {"name": "dshm", "mountPath": "/dev/shm"},
                                            {"name": "config-volume", "mountPath": "/config"},
                                        ],
                                    }],
                                    "volumes": [
                                        {"name": "dshm", "emptyDir": {"medium": "Memory"}},
                                        {"name": "config-volume", "configMap": {"name": "wr-config", "defaultMode": 493}},
                                    ],
                                },
                            }},
                        },
                    }]}},
                },
            })
        );
    }

    #[test]
    fn torch_runtime_without_gang_has_no_pod_metadata() {
        let wr = run(json!({
            "metadata": {"name": "wr"},
            "spec": {"image": "img", "numNodes": 2, "framework": {"torch": {"script": "t.py"}}},
        }));
        let rt = build_runtime(&wr, &params(), &[], 2);
        let node = replicated(&rt, "node");
        assert_eq!(
            node["template"]["metadata"]["labels"],
            json!({"app": "wr", "trainer.kubeflow.org/trainjob-ancestor-step": "trainer"})
        );
        assert_eq!(node["template"]["spec"]["template"].get("metadata"), None);
        assert_eq!(
            node["template"]["spec"]["template"]["spec"].get("schedulerName"),
            None
        );
    }

    // ---- workflow -----------------------------------------------------------------------------
    #[test]
    fn workflow_envelope_job_template_and_dependencies() {
        let wr = run(json!({
            "metadata": {"name": "wr", "namespace": "ns"},
            "spec": {
                "image": "img",
                "numNodes": 4,
                "framework": {"mpi": {"binary": "/b", "mpirunPath": "/m"}},
                "imagePullSecrets": [{"name": "regcred"}],
                "config": {"inline": {"a": "1"}},
                "checkpoint": {"storageSize": "10Gi", "storageClassName": "fast", "maxRestarts": 2},
                "goodputMeasurement": {"logProfileRef": "megatron"},
                "bandwidthMeasurement": {"logProfileRef": "nccl", "testType": "all_reduce"},
                "workloadMetadata": {"labels": {"kueue.x-k8s.io/queue-name": "q"}},
                "gangScheduler": {"schedulerName": "runai-scheduler", "queueLabelKey": "runai/queue", "queue": "team-a"},
                "thresholds": {"busBandwidthGBps": "value >= 900"},
                "target": {"nodeSelector": {"nvidia.com/gpu.present": "true"}},
                "orchestration": {"testScale": "intra-node", "maxConcurrent": 0, "placement": "Pinned"},
            },
        }));
        let wf = build_workflow(&wr, &params()).unwrap();
        assert_eq!(wf.api_version, "nvcre.nvidia.com/v1alpha1");
        assert_eq!(wf.kind, "Workflow");
        assert_eq!(wf.metadata.name, "wr");
        assert_eq!(wf.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(
            json!(wf.metadata.labels),
            json!({"app.kubernetes.io/managed-by": "nvcre", "nvcre.nvidia.com/workload-run": "wr"})
        );
        let job = &wf.spec.job_template["spec"];
        let train_job = &job["workload"]["trainJob"];
        assert_eq!(
            train_job["runtimeRef"],
            json!({"name": "wr-runtime", "kind": "TrainingRuntime"})
        );
        assert_eq!(train_job["trainer"]["numNodes"], 1);
        assert_eq!(
            train_job["runtimePatches"],
            json!([{
                "manager": "nvcre.nvidia.com/controller",
                "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
                    {"name": "node", "template": {"spec": {"template": {"spec": {"imagePullSecrets": [{"name": "regcred"}]}}}}},
                    {"name": "launcher", "template": {"spec": {"template": {"spec": {"imagePullSecrets": [{"name": "regcred"}]}}}}},
                ]}}},
            }])
        );
        assert_eq!(
            job["workloadMetadata"],
            json!({"labels": {"kueue.x-k8s.io/queue-name": "q"}})
        );
        assert_eq!(
            job["nodeHealthMonitor"],
            json!({"cel": {"expression": "node.spec.unschedulable == true"}})
        );
        assert_eq!(
            job["goodputMeasurement"],
            json!({"logProfileRef": "megatron"})
        );
        assert_eq!(
            job["bandwidthMeasurement"],
            json!({"logProfileRef": "nccl", "testType": "all_reduce"})
        );
        assert_eq!(
            job["checkpoint"],
            json!({"pvcName": "wr-checkpoint-pvc", "maxRestarts": 2})
        );

        let deps = &wf.spec.dependencies;
        assert_eq!(deps.len(), 3);
        assert_eq!(deps[0]["metadata"]["name"], "wr-runtime");
        assert_eq!(
            deps[1],
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "wr-config", "labels": {"app": "wr"}}, "data": {"a": "1"}})
        );
        assert_eq!(
            deps[2],
            json!({
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": "wr-checkpoint-pvc", "labels": {"app": "wr"}},
                "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "10Gi"}}, "storageClassName": "fast"},
            })
        );
        assert_eq!(
            Value::Object(wf.spec.orchestration.clone()),
            json!({
                "target": {"nodeSelector": {"nvidia.com/gpu.present": "true"}},
                "execution": {"maxConcurrent": 0, "timeoutPerJob": "24h0m0s"},
                "iterations": 1,
                "placement": "Pinned",
            })
        );
        assert_eq!(
            wf.spec.validation,
            Some(
                json!({"performance": {"enabled": true, "thresholds": {"thresholds": {"busBandwidthGBps": "value >= 900"}}}})
            )
        );
        assert_eq!(
            wf.spec.gang_scheduler,
            Some(GangSchedulerSpec {
                scheduler_name: "runai-scheduler".to_string(),
                queue: Some("team-a".to_string()),
                queue_label_key: Some("runai/queue".to_string()),
            })
        );
        assert!(wf.spec.overrides.is_empty());
        assert!(!wf.spec.job_template.to_string().contains("runai/queue"));
    }

    #[test]
    fn torch_without_pull_secrets_has_no_runtime_patches() {
        let wr = run(json!({
            "metadata": {"name": "t"},
            "spec": {"image": "img", "numNodes": 1, "framework": {"torch": {"script": "t.py"}}},
        }));
        let wf = build_workflow(&wr, &params()).unwrap();
        let train_job = &wf.spec.job_template["spec"]["workload"]["trainJob"];
        assert_eq!(train_job.get("runtimePatches"), None);
        assert_eq!(wf.spec.job_template["spec"].get("workloadMetadata"), None);
        assert_eq!(wf.spec.dependencies.len(), 1);
        assert_eq!(wf.spec.validation, None);
        assert_eq!(wf.spec.gang_scheduler, None);
    }

    #[test]
    fn mpi_without_pull_secrets_registers_bare_node_and_launcher() {
        let wf = build_workflow(&all_reduce(json!({})), &params()).unwrap();
        let patches = &wf.spec.job_template["spec"]["workload"]["trainJob"]["runtimePatches"];
        assert_eq!(
            patches[0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"],
            json!([{"name": "node"}, {"name": "launcher"}])
        );
    }

    #[test]
    fn intra_rack_orchestration() {
        let wr = all_reduce(
            json!({"orchestration": {"testScale": "intra-rack", "repeatCount": 3, "timeoutPerJob": "90m"}}),
        );
        let wf = build_workflow(&wr, &params()).unwrap();
        assert_eq!(
            Value::Object(wf.spec.orchestration),
            json!({
                "topology": {"strictDomain": true},
                "execution": {"timeoutPerJob": "1h30m0s"},
                "iterations": 3,
            })
        );
        assert_eq!(
            wf.spec.job_template["spec"]["workload"]["trainJob"]["trainer"]["numNodes"],
            4
        );
    }

    #[test]
    fn configmap_ref_mounts_the_named_configmap_without_a_dependency() {
        let wr = all_reduce(json!({"config": {"configMapRef": {"name": "mine"}}}));
        let wf = build_workflow(&wr, &params()).unwrap();
        assert_eq!(wf.spec.dependencies.len(), 1);
        let worker = replicated(&wf.spec.dependencies[0], "node");
        let pod = &worker["template"]["spec"]["template"]["spec"];
        assert_eq!(
            pod["volumes"][1],
            json!({"name": "config-volume", "configMap": {"name": "mine", "defaultMode": 493}})
        );
        assert_eq!(
            pod["containers"][0]["volumeMounts"][2],
            json!({"name": "config-volume", "mountPath": "/config"})
        );
    }

    // ---- errors: exact messages ---------------------------------------------------------------
    macro_rules! build_error {
        ($name:ident, $extra:expr, $want:expr) => {
            #[test]
            fn $name() {
                let err = build_workflow(&all_reduce($extra), &params()).unwrap_err();
                assert_eq!(err.to_string(), $want);
            }
        };
    }
    build_error!(
        err_timeout_bogus,
        json!({"orchestration": {"timeoutPerJob": "bogus"}}),
        "spec.orchestration.timeoutPerJob: invalid duration \"bogus\": expected decimal numbers each followed by a unit, such as \"90s\" or \"1h30m\""
    );
    build_error!(
        err_timeout_negative,
        json!({"orchestration": {"timeoutPerJob": "-1h"}}),
        "spec.orchestration.timeoutPerJob: invalid duration \"-1h\": a timeout cannot be negative"
    );
    build_error!(
        err_timeout_unit,
        json!({"orchestration": {"timeoutPerJob": "2d"}}),
        "spec.orchestration.timeoutPerJob: invalid duration \"2d\": unknown unit \"d\"; valid units are ns, us, µs, ms, s, m, h"
    );
    build_error!(
        err_unknown_thresholds,
        json!({"thresholds": {"zeta": "value > 1", "goodputRatio": "value > 0.9", "alpha": "value > 1"}}),
        "workloadrun nccl-all-reduce: unknown threshold key(s) [alpha zeta]; valid keys: [busBandwidthGBps, algBandwidthGBps, goodputRatio, avgTFLOPsPerGPU, avgStepTimeSec]"
    );
    build_error!(
        err_no_framework,
        json!({"framework": {}}),
        "workloadrun nccl-all-reduce: exec framework selected but spec.framework.exec is nil"
    );

    #[test]
    fn empty_timeout_uses_the_default() {
        let wr = all_reduce(json!({"orchestration": {"timeoutPerJob": ""}}));
        let p = BuildParams {
            default_timeout_per_job: "1h0m0s".to_string(),
            ..params()
        };
        let wf = build_workflow(&wr, &p).unwrap();
        assert_eq!(
            wf.spec.orchestration["execution"],
            json!({"timeoutPerJob": "1h0m0s"})
        );
    }

    #[test]
    fn timeout_error_carries_the_value() {
        let err = build_workflow(
            &all_reduce(json!({"orchestration": {"timeoutPerJob": "90"}})),
            &params(),
        )
        .unwrap_err();
        assert!(matches!(
            err,
            BuildError::InvalidTimeoutPerJob { ref value, reason: DurationError::MissingUnit } if value == "90"
        ));
    }
}
