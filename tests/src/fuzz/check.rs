//! `check_pipeline`: arbitrary bytes through `nvcre-policy check`.

use std::sync::LazyLock;
use std::time::Duration;

use nvcre_domain::{CheckRequest, default_rules};
use nvcre_engine::{RuleSet, Severity};
use nvcre_policy::check::Checker;
use nvcre_policy::input::NodeArgs;
use nvcre_policy::report::{self, Format, Summary};
use nvcre_policy::ruleset::RulesInfo;

use crate::generators::Catalog;

static RULES: LazyLock<RuleSet> =
    LazyLock::new(|| default_rules().unwrap_or_else(|e| panic!("the embedded rules: {e}")));

static INFO: LazyLock<RulesInfo> =
    LazyLock::new(|| RulesInfo::of(None).unwrap_or_else(|e| panic!("the rule set: {e}")));

/// Every `--platform P --gpu-arch A` the tables accept.
static FLAGS: LazyLock<Vec<CheckRequest>> = LazyLock::new(|| {
    let cat = Catalog::from_rules(&RULES).unwrap_or_else(|e| panic!("the catalog: {e}"));
    let mut out = Vec::new();
    for arch in &cat.gpu_architectures {
        for (platform, _) in &cat.platforms {
            out.push(request(NodeArgs {
                platform: Some(platform.clone()),
                gpu_arch: Some(arch.clone()),
                nodes_file: None,
            }));
        }
    }
    out
});

/// `--nodes-file` with each example node set.
static NODES: LazyLock<Vec<CheckRequest>> = LazyLock::new(|| {
    [
        "examples/nodes/aws-h100-18.yaml",
        "examples/nodes/onprem-gb200-8.yaml",
    ]
    .iter()
    .map(|f| {
        request(NodeArgs {
            platform: None,
            gpu_arch: None,
            nodes_file: Some(super::repo_file(f).display().to_string()),
        })
    })
    .collect()
});

/// The request `check` builds from its node flags.
fn request(args: NodeArgs) -> CheckRequest {
    let r = args
        .request(&RULES)
        .unwrap_or_else(|e| panic!("the flags {args:?}: {e}"));
    CheckRequest {
        platform: r.platform,
        gpu_arch: r.gpu_arch,
        nodes: r.nodes,
    }
}

/// Runs `data` through the whole `check` pipeline as `nvcre-policy check` runs it over one
/// input ([`Checker`]: the stream read document by document, the documents checked on the
/// thread pool seeing each other as `objects`, the quoting hazards), then renders the report
/// in every format, for `--fail-on error` and `warning`.
///
/// The first byte chooses the node context and the rest is the input: bits 0–1 none,
/// `--platform P --gpu-arch A`, or `--nodes-file` with one of the two example node sets; the
/// other bits choose P and A among the values the rule tables accept.
///
/// # Panics
/// On a panic underneath; when the JSON or SARIF report is not JSON, or the JUnit report does
/// not parse back.
pub fn check_pipeline(data: &[u8]) {
    let Some((&mode, input)) = data.split_first() else {
        return;
    };
    let none = CheckRequest::default();
    let choice = usize::from(mode >> 2);
    let req = match mode & 3 {
        0 => &none,
        1 => &FLAGS[choice % FLAGS.len()],
        m => &NODES[usize::from(m - 2)],
    };
    let mut checker = Checker::new(&RULES, req);
    checker.input("in.yaml", input);
    let checked = checker.finish();
    for fail_on in [Severity::Error, Severity::Warning] {
        let _ = checked.exit_code(fail_on);
        let report = checked.report(&RULES, &INFO, fail_on);
        let _ = Summary::of(&report).line(Duration::ZERO);
        for color in [false, true] {
            let _ = report::render(Format::Text, &report, color);
        }
        for format in [Format::Json, Format::Sarif] {
            let text = report::render(format, &report, false);
            if let Err(e) = serde_json::from_str::<serde_json::Value>(&text) {
                panic!("the {format:?} report is not JSON: {e}\n{text}");
            }
        }
        let junit = report::render(Format::Junit, &report, false);
        if let Err(e) = quick_junit::Report::deserialize_from_str(&junit) {
            panic!("the JUnit report does not parse back: {e}\n{junit}");
        }
        let _ = report::render(Format::Github, &report, false);
    }
    for stored in checked.findings.iter() {
        match stored {
            Ok(s) => {
                let _ = report::finding_text(&s.finding);
            }
            Err(e) => panic!("a kept finding does not read back: {e}"),
        }
    }
}
