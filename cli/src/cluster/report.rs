//! The WorkloadRun report: what `workloadrun report` and `run --wait` print, built from the
//! run, its Workflow, its failed-nodes ConfigMap and its BandwidthMeasurement /
//! GoodputMeasurement children; as JSON ([`WorkloadRunReport`] serialized) or as the 66-column
//! text box ([`text`]).

use std::collections::{BTreeSet, HashMap};

use nvcre_domain::crd::{GroupStatus, OrchestrationStatus, WorkflowResource, WorkloadRunResource};
use serde::Serialize;
use serde_json::Value;
use unicode_width::UnicodeWidthChar;

/// The report, in the JSON layout of the original (`title`, `name`, `platform`, `gpu`,
/// `totalNodes`, `categories`, `failedNodes`, `result`, `nodeResults`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadRunReport {
    /// Always `WorkloadRun Report`.
    pub title: String,
    /// The run's name.
    pub name: String,
    /// Detected platform ("" until detected).
    pub platform: String,
    /// Detected GPU architecture ("" until detected).
    pub gpu: String,
    /// Nodes the Workflow placed.
    pub total_nodes: i64,
    /// Exactly one category: `workloadrun/<name>`.
    pub categories: Vec<Category>,
    /// Names of the failed nodes (from the failed-nodes ConfigMap), sorted.
    pub failed_nodes: Vec<String>,
    /// `PASSED`, `FAILED` or `RUNNING`, from the run's conditions.
    pub result: String,
    /// One entry per node of every group that finished at least once.
    pub node_results: Vec<NodeResult>,
}

/// The run's one category.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Category {
    /// `workloadrun`.
    pub domain: String,
    /// The run's name.
    pub variant: String,
    /// `Succeeded`, `Failed` or `Running`, from the Workflow's conditions.
    pub status: String,
    /// Wall time from the run's creation to its terminal condition (or to now), Go style.
    pub runtime: String,
    /// `orchestration.testScale` (default `full-scale`).
    pub test_scale: String,
    /// Nodes per job.
    pub nodes_per_job: i64,
    /// Number of job groups.
    pub jobs: i64,
    /// `Unpinned` (only then set).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement: Option<String>,
    /// Unpinned: eligible target nodes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_nodes: Option<i64>,
    /// Unpinned: nodes the single job ran on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exercised_nodes: Option<i64>,
    /// Groups that failed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failed_groups: Vec<FailedGroup>,
    /// Goodput aggregates (one entry: the run's topology is not split into domains here).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub domains: Vec<DomainResult>,
    /// The largest-message-size bandwidth row of all measurements.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bandwidth: Vec<BandwidthRow>,
    /// Union of the measurements' NCCL transports, sorted.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub transport: Vec<String>,
    /// Per-group peak bandwidth (more than one group and more than one measurement).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub group_bandwidth: Vec<GroupBandwidth>,
    /// Each iteration of a run of more than one (`repeatCount`), the one in progress last.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub iterations: Vec<IterationResult>,
}

/// One iteration of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IterationResult {
    /// Iteration number (1-based).
    pub number: i32,
    /// `Succeeded` (no group failed), `Failed`, or `Running` (the one in progress).
    pub status: String,
    /// Wall time, Go style: from the end of the previous iteration (the run's creation for
    /// the first) to its end (or to now); "" when a time is unknown.
    pub duration: String,
}

/// A failed group.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FailedGroup {
    /// Group name (`group-0`).
    pub name: String,
    /// Node count.
    pub node_count: usize,
    /// Node names.
    pub nodes: Vec<String>,
    /// Why it failed (the TrainJob's Failed message, or the timeout), led by `iteration <i>: `
    /// in a run of more than one iteration (the latest failure).
    pub reason: String,
}

/// Goodput averages of a set of GoodputMeasurements (values > 0 only).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DomainResult {
    /// Joined topology domain names ("" when the run has none).
    pub name: String,
    /// Nodes of the groups measured.
    pub node_count: usize,
    /// Average goodput ratio (0..1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub goodput: Option<f64>,
    /// Average TFLOPs per GPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tflops: Option<f64>,
    /// Average step time, seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_time: Option<f64>,
}

/// One bandwidth row.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BandwidthRow {
    /// Message size in binary units with integer division (`16 GB`).
    pub size: String,
    /// `<algBW> GB/s`.
    #[serde(rename = "algBW")]
    pub alg_bw: String,
    /// `<busBW> GB/s`.
    #[serde(rename = "busBW")]
    pub bus_bw: String,
    /// Rows averaged.
    pub samples: i64,
}

/// A group's peak bus bandwidth.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupBandwidth {
    /// Group name.
    pub group_name: String,
    /// Node names.
    pub nodes: Vec<String>,
    /// Bus bandwidth of the largest message size, GB/s as measured ("" without data).
    #[serde(rename = "busBW")]
    pub bus_bw: String,
    /// Transports of the group's measurement.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub transport: Vec<String>,
    /// Below the `busBandwidthGBps` minimum (not evaluated: thresholds are CEL expressions the
    /// controller judges; a violation shows as the group's failure).
    pub below_min: bool,
    /// The group failed.
    pub failed: bool,
}

/// A node's outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeResult {
    /// Node name.
    pub name: String,
    /// Group name.
    pub group: String,
    /// The group's first topology domain, when the placement knows one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rack: Option<String>,
    /// `Failed` when the node failed in any iteration (as `failedNodes` lists it, or its group
    /// failed), else `Passed`.
    pub status: String,
}

/// What a report is built from.
pub struct Inputs<'a> {
    /// The run.
    pub run: &'a WorkloadRunResource,
    /// Its Workflow, when it exists.
    pub workflow: Option<&'a WorkflowResource>,
    /// `data.nodes` of the failed-nodes ConfigMap (`<node>: <reason>: <message>` lines).
    pub failed_nodes_data: Option<&'a str>,
    /// The run's BandwidthMeasurements (whole objects).
    pub bandwidth: &'a [Value],
    /// The run's GoodputMeasurements (whole objects).
    pub goodput: &'a [Value],
    /// Seconds since the epoch, for the runtime of a run still going.
    pub now_secs: i64,
}

/// Whether the run has a True condition of type `t`.
fn condition_true(conditions: &[nvcre_domain::crd::Condition], t: &str) -> bool {
    conditions
        .iter()
        .any(|c| c.type_ == t && c.status == "True")
}

/// Seconds since the epoch of an RFC 3339 UTC time (`2026-01-01T00:00:00Z`, optional
/// fraction); `None` when it does not parse.
pub fn rfc3339_secs(t: &str) -> Option<i64> {
    let t = t.trim_end_matches('Z');
    let (date, time) = t.split_once('T')?;
    let mut d = date.split('-').map(|p| p.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let time = time.split(['.', '+']).next()?;
    let mut h = time.split(':').map(|p| p.parse::<i64>().ok());
    let (hh, mm, ss) = (h.next()??, h.next()??, h.next()??);
    // Days from civil (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + hh * 3600 + mm * 60 + ss)
}

/// Builds the report.
pub fn build(inputs: &Inputs<'_>) -> WorkloadRunReport {
    let run = inputs.run;
    let name = run.metadata.name.clone().unwrap_or_default();
    let status = run.status.clone().unwrap_or_default();
    let result = if condition_true(&status.conditions, "Succeeded") {
        "PASSED"
    } else if condition_true(&status.conditions, "Failed") {
        "FAILED"
    } else {
        "RUNNING"
    };
    let wf_status = inputs.workflow.and_then(|w| w.status.clone());
    let orch = wf_status
        .as_ref()
        .and_then(|s| s.orchestration.clone())
        .unwrap_or_default();
    let wf_conditions = wf_status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default();
    let category_status = if condition_true(&wf_conditions, "Succeeded") {
        "Succeeded"
    } else if condition_true(&wf_conditions, "Failed") || result == "FAILED" {
        "Failed"
    } else {
        "Running"
    };

    // Runtime: creation to the terminal condition, else to now.
    let created = run
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.as_second());
    let finished = status
        .conditions
        .iter()
        .find(|c| (c.type_ == "Succeeded" || c.type_ == "Failed") && c.status == "True")
        .and_then(|c| c.last_transition_time.as_deref())
        .and_then(rfc3339_secs);
    let runtime = created
        .map(|c| {
            let end = if result == "RUNNING" {
                inputs.now_secs
            } else {
                finished.unwrap_or(inputs.now_secs)
            };
            super::format_go_duration((end - c).max(0).saturating_mul(1_000_000_000))
        })
        .unwrap_or_default();

    let spec_orch = run.spec.orchestration.clone().unwrap_or_default();
    let unpinned = orch.placement.as_deref() == Some("Unpinned")
        || spec_orch.placement.as_deref() == Some("Unpinned");
    let exercised: usize = orch.groups.iter().map(|g| g.nodes.len()).sum();

    let mut failed_nodes: BTreeSet<String> = BTreeSet::new();
    for line in inputs.failed_nodes_data.unwrap_or_default().lines() {
        let node = line.split(": ").next().unwrap_or_default().trim();
        if !node.is_empty() {
            failed_nodes.insert(node.to_string());
        }
    }

    let total_iterations = inputs
        .workflow
        .and_then(|w| w.spec.orchestration.get("iterations"))
        .and_then(Value::as_i64)
        .or(spec_orch.repeat_count)
        .unwrap_or(1)
        .max(i64::try_from(orch.iteration_history.len()).unwrap_or(i64::MAX));
    let failures = group_failures(&orch);
    let failed_groups: Vec<FailedGroup> = orch
        .groups
        .iter()
        .filter_map(|g| {
            let (iteration, message) = failures.get(g.name.as_str())?;
            Some(FailedGroup {
                name: g.name.clone(),
                node_count: g.nodes.len(),
                nodes: g.nodes.clone(),
                reason: if total_iterations > 1 {
                    format!("iteration {iteration}: {message}")
                } else {
                    message.clone()
                },
            })
        })
        .collect();

    // A group has a result once it finished in this iteration or any earlier one; a node is
    // Failed when it failed in any iteration, so the entries agree with `failedNodes`.
    let node_results = orch
        .groups
        .iter()
        .filter(|g| {
            g.phase == "Succeeded" || g.phase == "Failed" || !orch.iteration_history.is_empty()
        })
        .flat_map(|g| {
            let group_failed = failures.contains_key(g.name.as_str());
            let failed_nodes = &failed_nodes;
            g.nodes.iter().map(move |n| NodeResult {
                name: n.clone(),
                group: g.name.clone(),
                rack: g.domains.first().cloned(),
                status: if group_failed || failed_nodes.contains(n) {
                    "Failed"
                } else {
                    "Passed"
                }
                .into(),
            })
        })
        .collect();

    let iterations = if total_iterations > 1 {
        iteration_results(&orch, created, result == "RUNNING", inputs.now_secs)
    } else {
        Vec::new()
    };

    let (bandwidth, transport, group_bandwidth) = bandwidth_blocks(&orch.groups, inputs.bandwidth);
    let domains = goodput_block(inputs.goodput, &orch.groups);

    WorkloadRunReport {
        title: "WorkloadRun Report".into(),
        name: name.clone(),
        platform: status.detected_platform.clone().unwrap_or_default(),
        gpu: status.detected_gpu_architecture.clone().unwrap_or_default(),
        total_nodes: i64::from(orch.total_nodes),
        categories: vec![Category {
            domain: "workloadrun".into(),
            variant: name,
            status: category_status.into(),
            runtime,
            test_scale: spec_orch
                .test_scale
                .clone()
                .unwrap_or_else(|| "full-scale".into()),
            nodes_per_job: i64::from(orch.nodes_per_job),
            jobs: i64::from(orch.total_groups),
            placement: unpinned.then(|| "Unpinned".into()),
            target_nodes: unpinned.then_some(i64::from(orch.total_nodes)),
            exercised_nodes: unpinned.then(|| i64::try_from(exercised).unwrap_or(i64::MAX)),
            failed_groups,
            domains,
            bandwidth,
            transport,
            group_bandwidth,
            iterations,
        }],
        failed_nodes: failed_nodes.into_iter().collect(),
        result: result.into(),
        node_results,
    }
}

/// The latest failure of each group across every iteration, by group name: the iteration and
/// the message (the finished iterations' `iterationHistory`, then the current groups).
fn group_failures(orch: &OrchestrationStatus) -> HashMap<String, (i32, String)> {
    let mut out = HashMap::new();
    for record in &orch.iteration_history {
        for f in &record.failed_groups {
            out.insert(f.name.clone(), (record.iteration, f.message.clone()));
        }
    }
    for g in orch.groups.iter().filter(|g| g.phase == "Failed") {
        let iteration = g.iteration.max(1);
        let newer = out.get(&g.name).is_none_or(|(i, _)| *i <= iteration);
        if newer {
            out.insert(
                g.name.clone(),
                (iteration, g.message.clone().unwrap_or_default()),
            );
        }
    }
    out
}

/// Each finished iteration (from `iterationHistory`), then the one in progress while the run
/// is running. An iteration starts when the previous one finished (the next starts at once);
/// the first when the run was created.
fn iteration_results(
    orch: &OrchestrationStatus,
    created: Option<i64>,
    running: bool,
    now_secs: i64,
) -> Vec<IterationResult> {
    let span = |from: Option<i64>, to: Option<i64>| match (from, to) {
        (Some(a), Some(b)) => {
            super::format_go_duration((b - a).max(0).saturating_mul(1_000_000_000))
        }
        _ => String::new(),
    };
    let mut out = Vec::new();
    let mut start = created;
    for record in &orch.iteration_history {
        let end = record.completion_time.as_deref().and_then(rfc3339_secs);
        out.push(IterationResult {
            number: record.iteration,
            status: if record.failed_groups.is_empty() {
                "Succeeded"
            } else {
                "Failed"
            }
            .into(),
            duration: span(start, end),
        });
        start = end;
    }
    let last = orch.iteration_history.last().map_or(0, |r| r.iteration);
    if running && orch.current_iteration > last {
        out.push(IterationResult {
            number: orch.current_iteration,
            status: "Running".into(),
            duration: span(start, Some(now_secs)),
        });
    }
    out
}

/// `jobRef.name` of a measurement.
fn job_ref(m: &Value) -> Option<&str> {
    m.pointer("/spec/jobRef/name").and_then(Value::as_str)
}

/// The result with the largest `sizeBytes` of one measurement (the first wins a tie).
fn largest(m: &Value) -> Option<&Value> {
    let mut best: Option<(&Value, i64)> = None;
    for r in m
        .pointer("/status/results")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let size = r.get("sizeBytes").and_then(Value::as_i64).unwrap_or(0);
        if best.is_none_or(|(_, s)| size > s) {
            best = Some((r, size));
        }
    }
    best.map(|(r, _)| r)
}

/// `N GB` / `N MB` / `N KB` / `N B`, binary units, integer division.
pub fn size_label(bytes: i64) -> String {
    const K: i64 = 1024;
    if bytes >= K * K * K {
        format!("{} GB", bytes / (K * K * K))
    } else if bytes >= K * K {
        format!("{} MB", bytes / (K * K))
    } else if bytes >= K {
        format!("{} KB", bytes / K)
    } else {
        format!("{bytes} B")
    }
}

fn text_field(v: &Value, key: &str) -> String {
    match v.get(key) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

fn transports(m: &Value) -> Vec<String> {
    m.pointer("/status/transport")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect()
}

type BandwidthBlocks = (Vec<BandwidthRow>, Vec<String>, Vec<GroupBandwidth>);

/// The bandwidth row (largest size across all measurements), the transport union and, with
/// more than one group and more than one measurement, the per-group peaks.
fn bandwidth_blocks(groups: &[GroupStatus], measurements: &[Value]) -> BandwidthBlocks {
    let mut best: Option<(&Value, i64)> = None;
    for m in measurements {
        if let Some(r) = largest(m) {
            let size = r.get("sizeBytes").and_then(Value::as_i64).unwrap_or(0);
            if best.is_none_or(|(_, s)| size > s) {
                best = Some((r, size));
            }
        }
    }
    let rows = best
        .map(|(r, size)| {
            vec![BandwidthRow {
                size: size_label(size),
                alg_bw: format!("{} GB/s", text_field(r, "algBW")),
                bus_bw: format!("{} GB/s", text_field(r, "busBW")),
                samples: r.get("samples").and_then(Value::as_i64).unwrap_or(0),
            }]
        })
        .unwrap_or_default();
    let transport: BTreeSet<String> = measurements.iter().flat_map(transports).collect();
    let mut per_group = Vec::new();
    if groups.len() > 1 && measurements.len() > 1 {
        for g in groups {
            let m = measurements.iter().find(|m| {
                let j = job_ref(m);
                j.is_some() && j == g.job_ref.as_deref()
            });
            per_group.push(GroupBandwidth {
                group_name: g.name.clone(),
                nodes: g.nodes.clone(),
                bus_bw: m
                    .and_then(largest)
                    .map(|r| text_field(r, "busBW"))
                    .unwrap_or_default(),
                transport: m.map(transports).unwrap_or_default(),
                below_min: false,
                failed: g.phase == "Failed",
            });
        }
    }
    (rows, transport.into_iter().collect(), per_group)
}

/// A 6-decimal status string as a number; malformed or missing is 0.
fn decimal(m: &Value, key: &str) -> f64 {
    match m.pointer(&format!("/status/{key}")) {
        Some(Value::String(s)) => s.trim().parse().unwrap_or(0.0),
        Some(Value::Number(n)) => n.as_f64().unwrap_or(0.0),
        _ => 0.0,
    }
}

/// The average of the values > 0, `None` when there are none.
fn average_positive(values: impl Iterator<Item = f64>) -> Option<f64> {
    let kept: Vec<f64> = values.filter(|v| *v > 0.0).collect();
    #[allow(clippy::cast_precision_loss)]
    (!kept.is_empty()).then(|| kept.iter().sum::<f64>() / kept.len() as f64)
}

/// Goodput averages across every measurement (one domain entry), empty without measurements.
fn goodput_block(measurements: &[Value], groups: &[GroupStatus]) -> Vec<DomainResult> {
    if measurements.is_empty() {
        return Vec::new();
    }
    let goodput = average_positive(measurements.iter().map(|m| decimal(m, "result")));
    let tflops = average_positive(measurements.iter().map(|m| decimal(m, "avgTFLOPSPerGPU")));
    let step_time = average_positive(measurements.iter().map(|m| decimal(m, "avgStepTimeSec")));
    if goodput.is_none() && tflops.is_none() && step_time.is_none() {
        return Vec::new();
    }
    vec![DomainResult {
        name: String::new(),
        node_count: groups.iter().map(|g| g.nodes.len()).sum(),
        goodput,
        tflops,
        step_time,
    }]
}

/// Inner width of the boxes (66 columns with the borders).
const INNER: usize = 64;

/// Display width: wide characters count 2, combining and format characters 0.
fn width(s: &str) -> usize {
    s.chars().map(|c| c.width().unwrap_or(0)).sum()
}

/// `│  <content><padding>│`, 66 display columns (longer content is not cut).
fn card_line(content: &str) -> String {
    let used = 2 + width(content);
    format!("│  {content}{}│", " ".repeat(INNER.saturating_sub(used)))
}

/// Control characters escaped (`\n`, `\t`, `\u{1b}`; see [`nvcre_engine::printable`]), so a
/// measured string cannot break the box.
fn escape_control(s: &str) -> String {
    nvcre_engine::printable(s, &[]).into_owned()
}

/// The reason of a failed group in text: longer than 54 bytes → the first 51 bytes (on a char
/// boundary) and `...`.
fn truncate_reason(reason: &str) -> String {
    if reason.len() <= 54 {
        return reason.to_string();
    }
    let mut end = 51;
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &reason[..end])
}

/// The group label of the bandwidth-by-group block.
fn group_label(g: &GroupBandwidth) -> String {
    if !g.nodes.is_empty() && g.nodes.len() <= 4 {
        format!("{} ({})", g.group_name, g.nodes.join(", "))
    } else {
        format!("{} ({} nodes)", g.group_name, g.nodes.len())
    }
}

/// The text report: title box, header lines, the category card and the summary card.
pub fn text(r: &WorkloadRunReport) -> String {
    let mut out = Vec::<String>::new();
    let rule = |l: &str, r: &str, fill: &str| format!("{l}{}{r}", fill.repeat(INNER));
    out.push(String::new());
    out.push(rule("╔", "╗", "═"));
    let title_w = width(&r.title);
    let left = INNER.saturating_sub(title_w) / 2;
    let right = INNER.saturating_sub(title_w + left);
    out.push(format!(
        "║{}{}{}║",
        " ".repeat(left),
        r.title,
        " ".repeat(right)
    ));
    out.push(rule("╚", "╝", "═"));
    out.push(String::new());
    for (label, value) in [
        ("Name:", r.name.clone()),
        ("Platform:", r.platform.clone()),
        ("GPU:", r.gpu.clone()),
        (
            "Nodes:",
            if r.total_nodes > 0 {
                r.total_nodes.to_string()
            } else {
                String::new()
            },
        ),
    ] {
        if !value.is_empty() {
            out.push(format!("  {label:<10} {}", escape_control(&value)));
        }
    }
    out.push(String::new());
    for c in &r.categories {
        out.push(rule("┌", "┐", "─"));
        out.push(card_line(&format!("{}/{}", c.domain, c.variant)));
        out.push(rule("├", "┤", "─"));
        out.push(card_line(&format!("Status:    {}", c.status)));
        if !c.runtime.is_empty() {
            let across = if c.iterations.len() > 1 {
                format!(" (across {} iterations)", c.iterations.len())
            } else {
                String::new()
            };
            out.push(card_line(&format!("Runtime:   {}{across}", c.runtime)));
        }
        if !c.iterations.is_empty() {
            out.push(card_line("Iterations:"));
            for i in &c.iterations {
                let mark = match i.status.as_str() {
                    "Succeeded" => "✓",
                    "Failed" => "✗",
                    _ => "…",
                };
                let line = format!(
                    "    {mark}  {:<3} {:<10} {}",
                    i.number, i.status, i.duration
                );
                out.push(card_line(line.trim_end()));
            }
        }
        out.push(card_line(&format!("Scale:     {}", c.test_scale)));
        if let Some(p) = &c.placement {
            out.push(card_line(&format!("Placement: {p}")));
            out.push(card_line(&format!(
                "Nodes:     {} of {} target nodes exercised",
                c.exercised_nodes.unwrap_or(0),
                c.target_nodes.unwrap_or(0)
            )));
        }
        if c.nodes_per_job > 0 {
            out.push(card_line(&format!("Nodes/Job: {}", c.nodes_per_job)));
        }
        if c.jobs > 0 {
            out.push(card_line(&format!("Jobs:      {}", c.jobs)));
        }
        if !c.failed_groups.is_empty() {
            out.push(card_line(""));
            out.push(card_line("Failed Groups:"));
            for g in &c.failed_groups {
                out.push(card_line(&format!(
                    "    ✗  {} ({} nodes)",
                    g.name, g.node_count
                )));
                if !g.reason.is_empty() {
                    out.push(card_line(&format!(
                        "       {}",
                        truncate_reason(&escape_control(&g.reason))
                    )));
                }
                for n in &g.nodes {
                    out.push(card_line(&format!("         - {n}")));
                }
            }
        }
        for d in &c.domains {
            out.push(card_line(""));
            if !d.name.is_empty() {
                out.push(card_line(&format!("{} ({} nodes):", d.name, d.node_count)));
            }
            if let Some(g) = d.goodput {
                out.push(card_line(&format!(
                    "Avg Runtime Goodput:  {g:.2} ({:.0}%)",
                    g * 100.0
                )));
            }
            if let Some(t) = d.tflops {
                out.push(card_line(&format!("Avg TFLOPs/GPU:  {t:.1}")));
            }
            if let Some(s) = d.step_time {
                out.push(card_line(&format!("Avg Step Time:  {s:.2}s")));
            }
        }
        if !c.group_bandwidth.is_empty() {
            out.push(card_line(""));
            out.push(card_line("Bandwidth by group:"));
            for g in &c.group_bandwidth {
                let mark = if g.failed { "✗" } else { "✓" };
                out.push(card_line(&format!("    {mark}  {}", group_label(g))));
                if g.bus_bw.is_empty() {
                    out.push(card_line("       no bandwidth data"));
                } else {
                    let low = if g.below_min { "  LOW" } else { "" };
                    out.push(card_line(&format!("       {} GB/s{low}", g.bus_bw)));
                }
                if !g.transport.is_empty() {
                    out.push(card_line(&format!(
                        "       Transport: {}",
                        escape_control(&g.transport.join(", "))
                    )));
                }
                if g.failed {
                    for n in &g.nodes {
                        out.push(card_line(&format!("       - {n}")));
                    }
                }
            }
        }
        if !c.transport.is_empty() {
            out.push(card_line(""));
            out.push(card_line(&format!(
                "Transport: {}",
                escape_control(&c.transport.join(", "))
            )));
        }
        if !c.bandwidth.is_empty() {
            out.push(card_line(""));
            out.push(card_line("Bandwidth:"));
            out.push(card_line(&format!(
                "    {:<10} {:<12} {:<12} Samples",
                "Size", "AlgBW", "BusBW"
            )));
            for b in &c.bandwidth {
                out.push(card_line(&format!(
                    "    {:<10} {:<12} {:<12} {}",
                    b.size,
                    escape_control(&b.alg_bw),
                    escape_control(&b.bus_bw),
                    b.samples
                )));
            }
        }
        out.push(rule("└", "┘", "─"));
        out.push(String::new());
    }
    let passed = r
        .categories
        .iter()
        .filter(|c| c.status == "Succeeded")
        .count();
    out.push(rule("┌", "┐", "─"));
    out.push(card_line("Summary"));
    out.push(rule("├", "┤", "─"));
    out.push(card_line(&format!(
        "Categories:   {passed}/{} passed",
        r.categories.len()
    )));
    if r.failed_nodes.is_empty() {
        out.push(card_line("Failed Nodes: none"));
    } else {
        out.push(card_line(&format!(
            "Failed Nodes: {}",
            r.failed_nodes.len()
        )));
        for n in &r.failed_nodes {
            out.push(card_line(&format!("  - {n}")));
        }
    }
    out.push(card_line(&format!("Result:       {}", r.result)));
    out.push(rule("└", "┘", "─"));
    let mut s = out.join("\n");
    s.push('\n');
    s
}

/// The report as indented JSON (2 spaces), ending in a newline.
pub fn json(r: &WorkloadRunReport) -> String {
    let mut s = serde_json::to_string_pretty(r).unwrap_or_default();
    s.push('\n');
    s
}

/// The results file: a JSON array of one report, indented.
pub fn results_file(r: &WorkloadRunReport) -> String {
    let mut s = serde_json::to_string_pretty(&[r]).unwrap_or_default();
    s.push('\n');
    s
}

/// Sorted failed-node names from the ConfigMap data (for `status -o json`).
pub fn failed_node_names(data: Option<&str>) -> Vec<String> {
    let names: BTreeSet<String> = data
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(": ").next())
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(str::to_string)
        .collect();
    names.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sizes_use_binary_units_with_integer_division() {
        assert_eq!(size_label(17_179_869_184), "16 GB");
        assert_eq!(size_label(1_610_612_736), "1 GB");
        assert_eq!(size_label(1_048_576), "1 MB");
        assert_eq!(size_label(2048), "2 KB");
        assert_eq!(size_label(8), "8 B");
    }

    #[test]
    fn long_reasons_are_cut_at_51_bytes() {
        let reason =
            "Threshold \"busBandwidthGBps\" violated: measured 350.0000, expression: value >= 400";
        assert_eq!(
            truncate_reason(reason),
            "Threshold \"busBandwidthGBps\" violated: measured 350..."
        );
        assert_eq!(truncate_reason("short"), "short");
    }

    #[test]
    fn bandwidth_rows_pick_the_largest_size() {
        let bm = json!({"spec": {"jobRef": {"name": "j"}}, "status": {
            "results": [
                {"sizeBytes": 8, "algBW": "0.01", "busBW": "0.02", "samples": 4},
                {"sizeBytes": 17_179_869_184_i64, "algBW": "260.20", "busBW": "487.87", "samples": 65}
            ],
            "transport": ["Socket", "IB"]}});
        let (rows, transport, groups) = bandwidth_blocks(&[], &[bm]);
        assert_eq!(
            rows,
            [BandwidthRow {
                size: "16 GB".into(),
                alg_bw: "260.20 GB/s".into(),
                bus_bw: "487.87 GB/s".into(),
                samples: 65
            }]
        );
        assert_eq!(transport, ["IB", "Socket"]);
        assert!(groups.is_empty());
    }

    #[test]
    fn card_lines_are_66_columns_wide() {
        let line = card_line("    ✗  group-0 (2 nodes)");
        assert_eq!(width(&line), 66);
        let row = card_line(&format!(
            "    {:<10} {:<12} {:<12} {}",
            "16 GB", "260.20 GB/s", "487.87 GB/s", 65
        ));
        assert_eq!(
            row,
            format!(
                "│      16 GB      260.20 GB/s  487.87 GB/s  65{}│",
                " ".repeat(19)
            )
        );
        assert_eq!(width(&row), 66);
        assert_eq!(width(&card_line("日本")), 66);
    }

    #[test]
    fn an_unpinned_failed_run_reports_placement_and_a_cut_reason() {
        let run: WorkloadRunResource = serde_json::from_value(json!({
            "apiVersion": "nvcre.nvidia.com/v1alpha1", "kind": "WorkloadRun",
            "metadata": {"name": "u", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"image": "i", "numNodes": 2, "framework": {"exec": {"command": ["x"]}},
                     "orchestration": {"placement": "Unpinned", "testScale": "full-scale"}},
            "status": {"detectedPlatform": "aws", "conditions": [
                {"type": "Failed", "status": "True", "reason": "WorkflowFailed",
                 "message": "m", "lastTransitionTime": "2026-01-01T00:01:30Z"}]}
        }))
        .expect("run");
        let workflow: WorkflowResource = serde_json::from_value(json!({
            "apiVersion": "nvcre.nvidia.com/v1alpha1", "kind": "Workflow",
            "metadata": {"name": "u"},
            "spec": {"jobTemplate": {}, "orchestration": {}},
            "status": {"conditions": [{"type": "Failed", "status": "True", "reason": "IterationsFailed", "message": "m"}],
                "orchestration": {"totalNodes": 5, "nodesPerJob": 2, "totalGroups": 1,
                    "placement": "Unpinned",
                    "groups": [{"name": "group-0", "phase": "Failed", "nodes": ["n1", "n2"],
                        "message": "Threshold \"busBandwidthGBps\" violated: measured 350.0000, expression: value >= 400"}]}}
        }))
        .expect("workflow");
        let r = build(&Inputs {
            run: &run,
            workflow: Some(&workflow),
            failed_nodes_data: Some("n1: ThresholdViolation: low\nn2: ThresholdViolation: low"),
            bandwidth: &[],
            goodput: &[],
            now_secs: 0,
        });
        let c = &r.categories[0];
        assert_eq!(
            (
                r.result.as_str(),
                c.status.as_str(),
                c.runtime.as_str(),
                c.placement.as_deref(),
                c.target_nodes,
                c.exercised_nodes,
                r.failed_nodes.clone()
            ),
            (
                "FAILED",
                "Failed",
                "1m30s",
                Some("Unpinned"),
                Some(5),
                Some(2),
                vec!["n1".to_string(), "n2".to_string()]
            )
        );
        let text = text(&r);
        for line in [
            "│  Placement: Unpinned                                           │",
            "│  Nodes:     2 of 5 target nodes exercised                      │",
            "│         Threshold \"busBandwidthGBps\" violated: measured 350... │",
            "│  Failed Nodes: 2                                               │",
        ] {
            assert!(text.contains(line), "{line}\n{text}");
        }
    }

    /// repeatCount 2: group-0 failed in iteration 1 and passed in iteration 2, the Workflow
    /// failed. Its nodes are Failed in `nodeResults` as in `failedNodes`, the group is listed
    /// with the iteration it failed in, and each iteration has its line.
    #[test]
    fn a_failure_in_an_earlier_iteration_is_reported() {
        let run: WorkloadRunResource = serde_json::from_value(json!({
            "apiVersion": "nvcre.nvidia.com/v1alpha1", "kind": "WorkloadRun",
            "metadata": {"name": "r", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"image": "i", "numNodes": 2, "framework": {"exec": {"command": ["x"]}},
                     "orchestration": {"repeatCount": 2}},
            "status": {"conditions": [
                {"type": "Failed", "status": "True", "reason": "WorkflowFailed",
                 "message": "1 groups failed across 2 iterations", "lastTransitionTime": "2026-01-01T00:01:30Z"}],
                 "failedNodesRef": {"kind": "ConfigMap", "name": "r-failed-nodes"}}
        }))
        .expect("run");
        let workflow: WorkflowResource = serde_json::from_value(json!({
            "apiVersion": "nvcre.nvidia.com/v1alpha1", "kind": "Workflow",
            "metadata": {"name": "r"},
            "spec": {"jobTemplate": {}, "orchestration": {"iterations": 2}},
            "status": {"conditions": [{"type": "Failed", "status": "True", "reason": "IterationsFailed", "message": "1 groups failed across 2 iterations"}],
                "orchestration": {"totalNodes": 2, "nodesPerJob": 2, "totalGroups": 1, "currentIteration": 2, "completedIterations": 2,
                    "iterationHistory": [
                        {"iteration": 1, "succeededGroups": 0, "completionTime": "2026-01-01T00:00:50Z",
                         "failedGroups": [{"name": "group-0", "reason": "JobFailed", "message": "pod OOMKilled"}]},
                        {"iteration": 2, "succeededGroups": 1, "completionTime": "2026-01-01T00:01:30Z"}],
                    "groups": [{"name": "group-0", "phase": "Succeeded", "iteration": 2, "nodes": ["n1", "n2"],
                                "domains": ["rack-a", "rack-b"], "jobRef": "r-job-iter2"}]}}
        }))
        .expect("workflow");
        let r = build(&Inputs {
            run: &run,
            workflow: Some(&workflow),
            failed_nodes_data: Some(
                "n1: WorkloadFailed: pod OOMKilled\nn2: WorkloadFailed: pod OOMKilled",
            ),
            bandwidth: &[],
            goodput: &[],
            now_secs: 0,
        });
        let value = serde_json::to_value(&r).expect("json");
        assert_eq!(
            (
                &value["result"],
                &value["failedNodes"],
                &value["nodeResults"],
                &value["categories"][0]["failedGroups"],
                &value["categories"][0]["iterations"],
            ),
            (
                &json!("FAILED"),
                &json!(["n1", "n2"]),
                &json!([
                    {"name": "n1", "group": "group-0", "rack": "rack-a", "status": "Failed"},
                    {"name": "n2", "group": "group-0", "rack": "rack-a", "status": "Failed"}
                ]),
                &json!([{"name": "group-0", "nodeCount": 2, "nodes": ["n1", "n2"],
                         "reason": "iteration 1: pod OOMKilled"}]),
                &json!([
                    {"number": 1, "status": "Failed", "duration": "50s"},
                    {"number": 2, "status": "Succeeded", "duration": "40s"}
                ]),
            )
        );
        let text = text(&r);
        let card: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.contains("workloadrun/r"))
            .take_while(|l| !l.starts_with('└'))
            .collect();
        assert_eq!(
            card,
            [
                "│  workloadrun/r                                                 │",
                "├────────────────────────────────────────────────────────────────┤",
                "│  Status:    Failed                                             │",
                "│  Runtime:   1m30s (across 2 iterations)                        │",
                "│  Iterations:                                                   │",
                "│      ✗  1   Failed     50s                                     │",
                "│      ✓  2   Succeeded  40s                                     │",
                "│  Scale:     full-scale                                         │",
                "│  Nodes/Job: 2                                                  │",
                "│  Jobs:      1                                                  │",
                "│                                                                │",
                "│  Failed Groups:                                                │",
                "│      ✗  group-0 (2 nodes)                                      │",
                "│         iteration 1: pod OOMKilled                             │",
                "│           - n1                                                 │",
                "│           - n2                                                 │",
            ]
        );
    }

    /// A run of one iteration has no iteration list, no `(across …)` and no lead on a group's
    /// reason; a node of a passed group is Passed, without a rack when the placement has none.
    #[test]
    fn a_run_of_one_iteration_lists_no_iterations() {
        let run: WorkloadRunResource = serde_json::from_value(json!({
            "apiVersion": "nvcre.nvidia.com/v1alpha1", "kind": "WorkloadRun",
            "metadata": {"name": "r", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"image": "i", "numNodes": 1, "framework": {"exec": {"command": ["x"]}}},
            "status": {"conditions": [
                {"type": "Failed", "status": "True", "reason": "WorkflowFailed",
                 "message": "1 groups failed across 1 iterations", "lastTransitionTime": "2026-01-01T00:00:10Z"}]}
        }))
        .expect("run");
        let workflow: WorkflowResource = serde_json::from_value(json!({
            "apiVersion": "nvcre.nvidia.com/v1alpha1", "kind": "Workflow",
            "metadata": {"name": "r"},
            "spec": {"jobTemplate": {}, "orchestration": {}},
            "status": {"orchestration": {"totalNodes": 2, "nodesPerJob": 1, "totalGroups": 2, "currentIteration": 1,
                    "iterationHistory": [{"iteration": 1, "succeededGroups": 1, "completionTime": "2026-01-01T00:00:10Z",
                        "failedGroups": [{"name": "group-1", "reason": "JobFailed", "message": "exit 1"}]}],
                    "groups": [
                        {"name": "group-0", "phase": "Succeeded", "iteration": 1, "nodes": ["n1"]},
                        {"name": "group-1", "phase": "Failed", "iteration": 1, "nodes": ["n2"], "message": "exit 1"}]}}
        }))
        .expect("workflow");
        let r = build(&Inputs {
            run: &run,
            workflow: Some(&workflow),
            failed_nodes_data: Some("n2: WorkloadFailed: exit 1"),
            bandwidth: &[],
            goodput: &[],
            now_secs: 0,
        });
        let value = serde_json::to_value(&r).expect("json");
        assert_eq!(
            (
                &value["nodeResults"],
                &value["categories"][0]["failedGroups"],
                value["categories"][0].get("iterations"),
            ),
            (
                &json!([
                    {"name": "n1", "group": "group-0", "status": "Passed"},
                    {"name": "n2", "group": "group-1", "status": "Failed"}
                ]),
                &json!([{"name": "group-1", "nodeCount": 1, "nodes": ["n2"], "reason": "exit 1"}]),
                None,
            )
        );
        assert!(
            text(&r).contains("│  Runtime:   10s                                                │"),
            "{}",
            text(&r)
        );
    }

    #[test]
    fn rfc3339_times_convert_to_epoch_seconds() {
        assert_eq!(rfc3339_secs("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(rfc3339_secs("2026-01-01T00:00:00Z"), Some(1_767_225_600));
        assert_eq!(rfc3339_secs("2026-01-01T00:01:30.25Z"), Some(1_767_225_690));
        assert_eq!(rfc3339_secs("nope"), None);
    }
}
