//! Property suites over generated WorkloadRuns and node sets (library calls into
//! `nvcre_domain`). Each property runs `PROPTEST_CASES` cases (32 when unset) from proptest's
//! default seed; a failure prints the shrunk case as YAML with the `render` command to replay it.

use std::collections::{BTreeMap, BTreeSet};

use nvcre_domain::{
    CheckRequest, Node, RenderRequest, check_document, default_rules, nodes_from_documents,
    place_groups, render_document,
};
use nvcre_engine::{FieldPath, Finding, RuleSet, Segment, Severity, Source, parse_documents};
use nvcre_tests::generators::{self as generate, Catalog, QUEUE_KEY_SHAPES, RunCase};
use nvcre_tests::{k8s, mpi};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};
use serde_json::{Value, json};

/// 32 cases unless `PROPTEST_CASES` says otherwise, seed 0 unless `PROPTEST_RNG_SEED` says
/// otherwise (so `cargo test` is reproducible); no persistence files in the tree.
fn config() -> Config {
    let mut c = Config::default();
    if std::env::var("PROPTEST_CASES").is_err() {
        c.cases = 32;
    }
    if std::env::var("PROPTEST_RNG_SEED").is_err() {
        c.rng_seed = RngSeed::Fixed(0);
    }
    c.failure_persistence = None;
    c
}

thread_local! {
    static RULES: RuleSet = default_rules().unwrap_or_else(|e| panic!("embedded rules: {e}"));
}

fn catalog() -> Catalog {
    RULES
        .with(Catalog::from_rules)
        .unwrap_or_else(|e| panic!("catalog: {e}"))
}

/// Renders a document text for a node context: the Workflow, or the error (a rejection's
/// error messages joined by newlines; the warnings that come with it are left out).
fn render_text(text: &str, platform: &str, arch: &str) -> Result<Value, String> {
    RULES.with(|rules| render_with(rules, text, platform, arch))
}

/// [`render_text`] with the rule set given.
fn render_with(rules: &RuleSet, text: &str, platform: &str, arch: &str) -> Result<Value, String> {
    let source = Source::new("generated.yaml", text.to_string());
    let docs = parse_documents(&source).map_err(|e| e.to_string())?;
    let req = RenderRequest {
        platform: Some(platform.into()),
        gpu_arch: Some(arch.into()),
        ..RenderRequest::default()
    };
    match render_document(rules, &docs[0], &req) {
        Ok(r) => Ok(r.workflow),
        Err(nvcre_domain::PolicyError::Rejected(f)) => Err(f
            .iter()
            .filter(|f| f.severity == Severity::Error)
            .map(|f| f.message.as_str())
            .collect::<Vec<_>>()
            .join("\n")),
        Err(e) => Err(e.to_string()),
    }
}

fn render(case: &RunCase) -> Result<Value, String> {
    render_text(&case.yaml(), &case.platform, &case.gpu_arch)
}

/// Every document's findings of a text (the CLI's `check` on a file).
fn check_text(
    text: &str,
    platform: Option<&str>,
    arch: Option<&str>,
) -> Result<Vec<Vec<Finding>>, String> {
    let source = Source::new("generated.yaml", text.to_string());
    let docs = parse_documents(&source).map_err(|e| e.to_string())?;
    let req = CheckRequest {
        platform: platform.map(str::to_string),
        gpu_arch: arch.map(str::to_string),
        nodes: None,
    };
    RULES.with(|rules| {
        docs.iter()
            .map(|d| check_document(rules, d, &req).map_err(|e| e.to_string()))
            .collect()
    })
}

fn yaml(v: &Value) -> String {
    nvcre_engine::to_yaml(v).unwrap_or_else(|e| e.to_string())
}

/// The TrainingRuntime dependencies of a rendered Workflow.
fn runtimes(wf: &Value) -> Vec<&Value> {
    wf.pointer("/spec/dependencies")
        .and_then(Value::as_array)
        .map(|d| {
            d.iter()
                .filter(|x| x["kind"] == "TrainingRuntime")
                .collect()
        })
        .unwrap_or_default()
}

fn replicated_jobs(rt: &Value) -> Vec<&Value> {
    rt.pointer("/spec/template/spec/replicatedJobs")
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default()
}

/// Every `labels` mapping anywhere in `v`, with its JSON pointer.
fn label_maps<'a>(
    v: &'a Value,
    at: String,
    out: &mut Vec<(String, &'a serde_json::Map<String, Value>)>,
) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let here = format!("{at}/{k}");
                if k == "labels"
                    && let Value::Object(l) = x
                {
                    out.push((here.clone(), l));
                }
                label_maps(x, here, out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                label_maps(x, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

proptest! {
    #![proptest_config(config())]

    /// Rendering twice gives the same Workflow; rendering that Workflow for the same node
    /// context only records the overrides it applied (none), and rendering it once more changes
    /// nothing.
    #[test]
    fn render_is_deterministic_and_idempotent(case in generate::workload_run(&catalog())) {
        let first = render(&case);
        prop_assert_eq!(&first, &render(&case), "two renders differ\n{}", case.counterexample());
        let first = match first {
            Ok(w) => w,
            Err(e) => return Err(TestCaseError::fail(format!("a valid run did not render: {e}\n{}", case.counterexample()))),
        };
        let second = render_text(&yaml(&first), &case.platform, &case.gpu_arch)
            .map_err(|e| TestCaseError::fail(format!("the rendered Workflow did not render: {e}\n{}", case.counterexample())))?;
        let mut without = second.clone();
        let applied = without["metadata"]["annotations"]
            .as_object_mut()
            .and_then(|a| a.remove("nvcrectl.nvidia.com/applied-overrides"));
        prop_assert_eq!(applied, Some(json!("[]")), "a Workflow render records no applied override\n{}", case.counterexample());
        prop_assert_eq!(&without, &first, "rendering the rendered Workflow changed it\n{}", case.counterexample());
        let third = render_text(&yaml(&second), &case.platform, &case.gpu_arch);
        prop_assert_eq!(third.as_ref(), Ok(&second), "a Workflow render is not idempotent\n{}", case.counterexample());
    }

    /// The rule set's caches change nothing: rendering with the rule set every case shares
    /// (its table caches warm with other runs' names and shapes, its platform rows kept with
    /// the run name's placeholder and filled in) gives what a rule set loaded for this case
    /// alone gives.
    #[test]
    fn a_rule_set_with_warm_caches_renders_as_a_fresh_one(case in generate::workload_run(&catalog())) {
        let warm = render(&case);
        let fresh = default_rules().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let cold = render_with(&fresh, &case.yaml(), &case.platform, &case.gpu_arch);
        prop_assert_eq!(warm, cold, "{}", case.counterexample());
    }

    /// Checking a valid run finds no error (warnings such as an unset Run:ai queue may be
    /// reported), and checking what it renders to finds nothing at all.
    #[test]
    fn checking_the_rendered_output_gives_no_findings(case in generate::workload_run(&catalog())) {
        let wf = render(&case).map_err(|e| TestCaseError::fail(format!("{e}\n{}", case.counterexample())))?;
        for (what, text, errors_only) in [("the WorkloadRun", case.yaml(), true), ("the rendered Workflow", yaml(&wf), false)] {
            let findings = check_text(&text, Some(&case.platform), Some(&case.gpu_arch))
                .map_err(|e| TestCaseError::fail(format!("{what}: {e}\n{}", case.counterexample())))?;
            let messages: Vec<String> = findings
                .concat()
                .iter()
                .filter(|f| !errors_only || f.severity == Severity::Error)
                .map(|f| format!("{}: {}", f.rule_id, f.message))
                .collect();
            prop_assert!(messages.is_empty(), "check of {what} found {messages:#?}\n{}", case.counterexample());
        }
    }

    /// The merged env (base NCCL env, then the user's) and every env entry of the ranks'
    /// (worker, replicatedJob `node`) containers is forwarded with `-x` once per name, with the
    /// value the ranks' container holds, else the launcher's (bare for `valueFrom`); every
    /// `NAME=value` forward of a name a container also
    /// sets carries that value. (Where a platform patch sets a base env name on the workers, the
    /// ranks get the patched value: `-x` sets it whatever the launcher's env says.)
    #[test]
    fn mpi_forwards_each_env_once_with_the_container_value(case in generate::mpi_run(&catalog())) {
        let cat = catalog();
        let ce = case.counterexample();
        let wf = render(&case).map_err(|e| TestCaseError::fail(format!("{e}\n{ce}")))?;
        let trainer = wf.pointer("/spec/jobTemplate/spec/workload/trainJob/trainer").cloned().unwrap_or(Value::Null);
        let argv = mpi::trainer_argv(&trainer).map_err(|e| TestCaseError::fail(format!("{e}\n{ce}")))?;
        let mut by_name: BTreeMap<String, Vec<Option<String>>> = BTreeMap::new();
        for (n, v) in mpi::forwards(&argv) {
            by_name.entry(n).or_default().push(v);
        }
        let merged: BTreeSet<String> = cat.base_env.iter().cloned().chain(case.env.iter().map(|e| e.name.clone())).collect();
        let value_of = |e: &Value| if e.get("valueFrom").is_some() { None } else { Some(e["value"].as_str().unwrap_or("").to_string()) };
        let containers_of = |job: &Value| job.pointer("/template/spec/template/spec/containers").and_then(Value::as_array).cloned().unwrap_or_default();
        let mut ranks_env: BTreeMap<String, Option<String>> = BTreeMap::new();
        for job in runtimes(&wf).into_iter().flat_map(replicated_jobs).filter(|j| j["name"] == "node") {
            for c in containers_of(job) {
                for e in c["env"].as_array().cloned().unwrap_or_default() {
                    ranks_env.insert(e["name"].as_str().unwrap_or("").to_string(), value_of(&e));
                }
            }
        }
        let mut containers = 0;
        for rt in runtimes(&wf) {
            for job in replicated_jobs(rt) {
                for c in containers_of(job) {
                    containers += 1;
                    for e in c["env"].as_array().cloned().unwrap_or_default() {
                        let name = e["name"].as_str().unwrap_or("").to_string();
                        let want = ranks_env.get(&name).cloned().unwrap_or_else(|| value_of(&e));
                        let got = by_name.get(&name).cloned().unwrap_or_default();
                        // The ranks' container env is all forwarded: ranks started over ssh see no
                        // other (a platform's IB env on the workers included).
                        if merged.contains(&name) || job["name"] == "node" {
                            prop_assert_eq!(&got, &vec![want], "replicatedJob {} container {}: env {} forwarded as {:?}\n{}", job["name"], c["name"], name, got, ce);
                        } else {
                            prop_assert!(got.len() <= 1 && got.iter().all(|g| g.is_none() || *g == want),
                                "replicatedJob {} container {}: env {} = {:?} forwarded as {:?}\n{}", job["name"], c["name"], name, want, got, ce);
                        }
                    }
                }
            }
        }
        prop_assert!(containers >= 2, "launcher and worker containers expected\n{}", ce);
        for (name, fwd) in &by_name {
            prop_assert_eq!(fwd.len(), 1, "{} is forwarded {} times\n{}", name, fwd.len(), ce);
        }
    }

    /// With a gang scheduler, the resolved queue is on the workload object and on every
    /// replicated job's job template and pod template under the configured key, the scheduler
    /// name on every pod spec, and no label map holds another queue key shape.
    #[test]
    fn gang_queue_label_and_scheduler_are_everywhere_under_the_configured_key(case in generate::gang_run(&catalog())) {
        let cat = catalog();
        let g = case.gang.clone().unwrap_or_else(|| unreachable!("gang_run sets a gang"));
        let (queue, key) = (g.resolved_queue(&cat), g.resolved_key(&cat));
        let wf = render(&case).map_err(|e| TestCaseError::fail(format!("{e}\n{}", case.counterexample())))?;
        let ce = case.counterexample();
        prop_assert_eq!(wf.pointer("/spec/jobTemplate/spec/workloadMetadata/labels").and_then(|l| l.get(&key)), Some(&json!(queue)), "workload object\n{}", ce);
        let rts = runtimes(&wf);
        prop_assert!(!rts.is_empty(), "no TrainingRuntime\n{}", ce);
        for rt in rts {
            for job in replicated_jobs(rt) {
                for p in ["/template/metadata/labels", "/template/spec/template/metadata/labels"] {
                    prop_assert_eq!(job.pointer(p).and_then(|l| l.get(&key)), Some(&json!(queue)), "{} of {}\n{}", p, job["name"], ce);
                }
                prop_assert_eq!(job.pointer("/template/spec/template/spec/schedulerName"), Some(&json!(g.scheduler)), "scheduler of {}\n{}", job["name"], ce);
            }
        }
        let mut maps = Vec::new();
        label_maps(&wf, String::new(), &mut maps);
        for (at, m) in maps {
            for other in QUEUE_KEY_SHAPES.iter().filter(|k| !k.is_empty() && **k != key) {
                prop_assert!(!m.contains_key(*other), "{at} holds {other} besides {key}\n{ce}");
            }
        }
    }

    /// An override adding an unrelated workload label is accepted (and kept); one changing
    /// the queue label is refused with the exact message; one removing it (merge or JSON Patch)
    /// gets it restored.
    #[test]
    fn queue_label_overrides_are_accepted_refused_or_restored(
        case in generate::gang_run(&catalog()),
        extra in "team-[a-z0-9]{1,10}",
        other in "o[a-z0-9]{0,10}",
        patch in any::<bool>(),
    ) {
        let cat = catalog();
        let g = case.gang.clone().unwrap_or_else(|| unreachable!("gang_run sets a gang"));
        let (queue, key) = (g.resolved_queue(&cat), g.resolved_key(&cat));
        let with = |o: Value| { let mut c = case.clone(); c.overrides.push(o); c };

        let add = with(json!({"when": {}, "jobTemplate": {"spec": {"workloadMetadata": {"labels": {extra.clone(): "v"}}}}}));
        let wf = render(&add).map_err(|e| TestCaseError::fail(format!("adding {extra}: {e}\n{}", add.counterexample())))?;
        let labels = wf.pointer("/spec/jobTemplate/spec/workloadMetadata/labels").cloned().unwrap_or(Value::Null);
        prop_assert_eq!(&labels[&extra], &json!("v"), "\n{}", add.counterexample());
        prop_assert_eq!(&labels[&key], &json!(queue), "\n{}", add.counterexample());

        let change = with(json!({"when": {}, "jobTemplate": {"spec": {"workloadMetadata": {"labels": {key.clone(): other.clone()}}}}}));
        let want = format!(
            "spec.jobTemplate.spec.workloadMetadata.labels[{}]: conflicting label value {}, expected {}",
            json!(key), json!(other), json!(queue)
        );
        prop_assert_eq!(render(&change).err(), Some(want), "\n{}", change.counterexample());

        let remove = with(if patch {
            json!({"when": {}, "jobTemplatePatch": [{"op": "remove", "path": format!("/spec/workloadMetadata/labels/{}", key.replace('~', "~0").replace('/', "~1"))}]})
        } else {
            json!({"when": {}, "jobTemplate": {"spec": {"workloadMetadata": {"labels": {key.clone(): null}}}}})
        });
        let wf = render(&remove).map_err(|e| TestCaseError::fail(format!("removing: {e}\n{}", remove.counterexample())))?;
        prop_assert_eq!(wf.pointer("/spec/jobTemplate/spec/workloadMetadata/labels").and_then(|l| l.get(&key)), Some(&json!(queue)), "\n{}", remove.counterexample());
    }

    /// The direct evaluation of the plainest rule expressions changes no finding: checking a
    /// run (with a generated label, valid or not), with and without a node context, and the
    /// Workflow it renders gives the same findings, in order, as the CEL interpreter alone.
    #[test]
    fn direct_evaluation_changes_no_finding(
        case in generate::workload_run(&catalog()),
        key in generate::label_key(),
        value in generate::label_value(),
    ) {
        let mut doc = case.document();
        doc["spec"]["workloadMetadata"]["labels"][key.as_str()] = json!(value);
        let text = yaml(&doc);
        let mut texts = vec![(text.clone(), None), (text, Some((case.platform.as_str(), case.gpu_arch.as_str())))];
        if let Ok(wf) = render(&case) {
            texts.push((yaml(&wf), None));
        }
        for (text, context) in texts {
            let check = || check_text(&text, context.map(|c| c.0), context.map(|c| c.1));
            nvcre_engine::set_direct_evaluation(false);
            let interpreted = check();
            nvcre_engine::set_direct_evaluation(true);
            let direct = check();
            prop_assert_eq!(
                format!("{direct:?}"),
                format!("{interpreted:?}"),
                "# nvcre-policy check{}\n{}",
                context.map(|(p, a)| format!(" --platform {p} --gpu-arch {a}")).unwrap_or_default(),
                text
            );
        }
    }

    /// The workload label checks agree with apimachinery's patterns and limits: a reserved key
    /// is refused as reserved, an invalid key as an invalid key, an invalid value as an invalid
    /// value, anything else is accepted.
    #[test]
    fn label_checks_agree_with_the_kubernetes_patterns(key in generate::label_key(), value in generate::label_value()) {
        let doc = json!({
            "apiVersion": "nvcre.nvidia.com/v1alpha1", "kind": "Workflow", "metadata": {"name": "wf"},
            "spec": {"jobTemplate": {"spec": {"workloadMetadata": {"labels": {key.clone(): value.clone()}}}}}
        });
        let text = yaml(&doc);
        let findings = check_text(&text, None, None).map_err(TestCaseError::fail)?.concat();
        let at = format!("spec.jobTemplate.spec.workloadMetadata.labels[{}]", json!(key));
        let want = if k8s::is_reserved(&key) {
            Some(format!("{at}: label key is reserved"))
        } else if !k8s::is_qualified_name(&key) {
            Some(format!("{at}: invalid label key: "))
        } else if !k8s::is_valid_label_value(&value) {
            Some(format!("{at}: invalid label value {}: ", json!(value)))
        } else {
            None
        };
        let got: Vec<String> = findings.iter().map(|f| f.message.clone()).collect();
        match want {
            None => prop_assert!(got.is_empty(), "valid label refused: {got:#?}\n# nvcre-policy check workflow.yaml\n{text}"),
            Some(prefix) => prop_assert!(
                got.len() == 1 && got[0].starts_with(&prefix),
                "expected one finding starting {prefix:?}, got {got:#?}\n# nvcre-policy check workflow.yaml\n{text}"
            ),
        }
    }

    /// Pinned partitioning covers every node: the full groups are disjoint, every node is in
    /// one of them or in an overflow group, overflow groups are full, and the groups do not
    /// depend on the order the nodes come in.
    #[test]
    fn partitioning_covers_every_node_once_in_any_order(
        set in generate::node_set(&catalog(), 24, true),
        npj in 1i64..6,
        topology in any::<bool>(),
        strict in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let nodes: Vec<Node> = nodes_from_documents(&set.documents()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let key = topology.then_some(set.topology_key.as_str());
        let ce = format!("npj {npj}, topology key {key:?}, strict {strict}\n# nodes.yaml\n{}",
            set.documents().iter().map(yaml).collect::<Vec<_>>().join("---\n"));
        let groups = place_groups(&nodes, npj, key, strict && topology).map_err(|e| TestCaseError::fail(format!("{e}\n{ce}")))?;
        let all: BTreeSet<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
        let mut primary: BTreeMap<&str, usize> = BTreeMap::new();
        let mut covered: BTreeSet<&str> = BTreeSet::new();
        for g in &groups {
            for n in &g.nodes {
                covered.insert(n.as_str());
                if !g.overflow {
                    *primary.entry(n.as_str()).or_default() += 1;
                }
            }
            let size = i64::try_from(g.nodes.len()).unwrap_or(i64::MAX);
            if g.overflow {
                prop_assert_eq!(size, npj, "overflow group {} is not full\n{}", g.name, ce);
            }
        }
        prop_assert_eq!(&covered, &all, "not every node is covered\n{}", ce);
        for (n, count) in &primary {
            prop_assert_eq!(*count, 1, "node {} is in {} full groups\n{}", n, count, ce);
        }
        // The same nodes in another order give the same groups.
        let mut shuffled = nodes.clone();
        let mut s = seed;
        for i in (1..shuffled.len()).rev() {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let j = usize::try_from(s >> 33).unwrap_or(0) % (i + 1);
            shuffled.swap(i, j);
        }
        let again = place_groups(&shuffled, npj, key, strict && topology).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let shape = |gs: &[nvcre_domain::Group]| gs.iter().map(|g| (g.name.clone(), g.nodes.clone(), g.overflow)).collect::<Vec<_>>();
        prop_assert_eq!(shape(&groups), shape(&again), "the input order changed the groups\n{}", ce);
    }

    /// `check` of a document, of the same document inside a `List`, and as the second
    /// document of a stream gives the same findings; every finding's line:column points at the
    /// field it names (its key or value, or the nearest ancestor written).
    #[test]
    fn check_agrees_on_document_list_and_stream_and_points_at_the_field(
        case in generate::workload_run(&catalog()),
        key in generate::label_key(),
        value in generate::label_value(),
    ) {
        let mut doc = case.document();
        doc["spec"]["workloadMetadata"] = json!({"labels": {key: value}});
        let alone = yaml(&doc);
        let list = yaml(&json!({"apiVersion": "v1", "kind": "List", "items": [doc.clone()]}));
        let stream = format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: first}}\n---\n{alone}");
        let ce = format!("# nvcre-policy check counterexample.yaml\n{alone}");
        let one = check_text(&alone, None, None).map_err(|e| TestCaseError::fail(format!("{e}\n{ce}")))?.concat();
        let in_list = check_text(&list, None, None).map_err(|e| TestCaseError::fail(format!("{e}\n{ce}")))?.concat();
        let in_stream = check_text(&stream, None, None).map_err(|e| TestCaseError::fail(format!("{e}\n{ce}")))?;
        let key_of = |f: &Finding, strip: &str| (
            f.rule_id.clone(), f.severity, f.message.clone(),
            f.field_path.as_deref().map(|p| p.strip_prefix(strip).unwrap_or(p).to_string()),
        );
        let want: Vec<_> = one.iter().map(|f| key_of(f, "")).collect();
        prop_assert_eq!(&in_list.iter().map(|f| key_of(f, "items[0].")).collect::<Vec<_>>(), &want, "List\n{}", ce);
        prop_assert_eq!(in_stream.first().map(Vec::len), Some(0), "the ConfigMap has no findings\n{}", ce);
        prop_assert_eq!(&in_stream[1].iter().map(|f| key_of(f, "")).collect::<Vec<_>>(), &want, "stream\n{}", ce);
        for (text, findings, value) in [
            (&alone, &one, doc.clone()),
            (&list, &in_list, json!({"items": [doc.clone()]})),
        ] {
            for f in findings {
                points_at_field(text, f, &value).map_err(|e| TestCaseError::fail(format!("{e}\n{ce}")))?;
            }
        }
        for f in &in_stream[1] {
            let offset = stream.lines().take_while(|l| *l != "---").count() + 1;
            let shifted = Finding { line: f.line.map(|l| l - offset), ..f.clone() };
            points_at_field(&alone, &shifted, &doc).map_err(|e| TestCaseError::fail(format!("stream: {e}\n{ce}")))?;
        }
    }
}

/// The text at a finding's line:column starts with the key or the value of the deepest field
/// of its path that the document has (a block mapping or list points at its key).
fn points_at_field(text: &str, f: &Finding, doc: &Value) -> Result<(), String> {
    let (Some(path), Some(line), Some(col)) = (&f.field_path, f.line, f.column) else {
        return Ok(());
    };
    let parsed = FieldPath::parse(path)
        .map_err(|e| format!("{}: unparsable field path {path}: {}", f.rule_id, e.message))?;
    let mut segs = parsed.segments().to_vec();
    while !segs.is_empty() && FieldPath::from_segments(segs.clone()).get(doc).is_none() {
        segs.pop();
    }
    let Some(last) = segs.last() else {
        return Ok(());
    };
    let here = text
        .lines()
        .nth(line.saturating_sub(1))
        .and_then(|l| l.get(col.saturating_sub(1)..))
        .unwrap_or("");
    let value = FieldPath::from_segments(segs.clone())
        .get(doc)
        .cloned()
        .unwrap_or(Value::Null);
    let mut starts: Vec<String> = Vec::new();
    if let Segment::Key(k) = last {
        starts.push(k.clone());
        starts.push(json!(k).to_string());
        starts.push(format!("'{k}"));
    }
    if let Segment::Index(_) = last {
        starts.push("- ".into());
    }
    match &value {
        Value::String(s) if !s.is_empty() => {
            starts.push(s.lines().next().unwrap_or("").to_string());
            starts.push("\"".into());
            starts.push("'".into());
            starts.push("|".into());
        }
        Value::String(_) => {
            starts.push("\"\"".into());
            starts.push("''".into());
        }
        Value::Object(_) | Value::Array(_) => {
            starts.push("{".into());
            starts.push("[".into());
        }
        other => starts.push(other.to_string()),
    }
    if starts
        .iter()
        .any(|s| !s.is_empty() && here.starts_with(s.as_str()))
    {
        Ok(())
    } else {
        Err(format!(
            "{} at {line}:{col} names {path} but the text there is {here:?}",
            f.rule_id
        ))
    }
}

/// The catalog comes from the shipped tables: every selectable platform and architecture.
#[test]
fn the_catalog_reads_the_shipped_tables() {
    let cat = catalog();
    let platforms: Vec<&str> = cat.platforms.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        platforms,
        [
            "aws",
            "gcp",
            "azure",
            "oci",
            "onprem",
            "togetherai",
            "mistral",
            "forge",
            "nscale"
        ]
    );
    assert_eq!(
        cat.gpu_architectures,
        [
            "a100", "b200", "gb200", "gb300", "h100", "h200", "l40", "l40s"
        ]
    );
    assert_eq!(cat.base_env.first().map(String::as_str), Some("NCCL_DEBUG"));
    assert_eq!(
        (
            cat.default_queue.as_str(),
            cat.default_queue_label_key.as_str()
        ),
        ("default-queue", "kai.scheduler/queue")
    );
}

/// On GCP GB200/GB300 the platform patch sets `NCCL_NET_GDR_LEVEL=5` on the worker container,
/// and `-x` forwards that value to the ranks, once, not the base env's `PHB` (the original
/// forwards `PHB`, so its ranks run with another level than the workers' env says).
#[test]
fn a_platform_patched_base_env_name_is_forwarded_with_the_patched_value() {
    for (platform, arch, name) in [
        ("gcp", "gb200", "NCCL_NET_GDR_LEVEL"),
        ("gcp", "gb300", "NCCL_NET_GDR_LEVEL"),
    ] {
        let case = RunCase {
            name: "gap".into(),
            platform: platform.to_string(),
            gpu_arch: arch.to_string(),
            num_nodes: 2,
            framework: generate::FrameworkCase::Mpi { mpi_args: vec![] },
            gang: None,
            env: vec![],
            labels: BTreeMap::new(),
            overrides: vec![],
        };
        let wf = render(&case).unwrap_or_else(|e| panic!("{e}"));
        let trainer = &wf["spec"]["jobTemplate"]["spec"]["workload"]["trainJob"]["trainer"];
        let argv = mpi::trainer_argv(trainer).unwrap_or_else(|e| panic!("{e}"));
        let forwarded: Vec<_> = mpi::forwards(&argv)
            .into_iter()
            .filter(|(n, _)| n == name)
            .collect();
        assert_eq!(
            forwarded,
            [(name.to_string(), Some("5".to_string()))],
            "{platform} {arch}"
        );
        let worker: Vec<&Value> = runtimes(&wf)
            .into_iter()
            .flat_map(replicated_jobs)
            .filter(|j| j["name"] == "node")
            .flat_map(|j| {
                j.pointer("/template/spec/template/spec/containers")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
            })
            .flat_map(|c| c["env"].as_array().into_iter().flatten())
            .filter(|e| e["name"] == *name)
            .collect();
        assert_eq!(
            worker,
            [&json!({"name": name, "value": "5"})],
            "{platform} {arch}"
        );
    }
}
