//! The findings the pipeline itself reports, beside the rule files' ([`BUILT_IN_RULES`]): what
//! each one means and what to do, for `rules explain` and the rule descriptions of reports.
//! Their ids are stable; their findings carry `ruleFile: <built-in>`.

use nvcre_engine::Severity;

use crate::check::{LEGACY_API_GROUP_RULE, NOT_AN_OBJECT_RULE, PLACEMENT_RULE};
use crate::hazards::{NULL_QUANTITY_RULE, YAML_QUOTE_RULE};

/// One finding the pipeline reports without a rule file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltInRule {
    /// The finding's `ruleId`.
    pub id: &'static str,
    /// The finding's `pack`.
    pub pack: &'static str,
    /// Its severity (`not-a-kubernetes-object`: info for a mapping without kind, a warning
    /// otherwise; this is the higher).
    pub severity: Severity,
    /// One sentence: when it is reported.
    pub description: &'static str,
    /// Why it matters and what to do, in a few lines.
    pub explanation: &'static str,
}

/// Rule id of the warning that `check --platform` used the unknown architecture's defaults.
pub const UNKNOWN_ARCH_RULE: &str = "gpu-architecture-unknown";

/// Rule id of the warning that target nodes were left out because they are cordoned.
pub const CORDONED_NODES_RULE: &str = "cordoned-nodes-left-out";

/// Rule id of the warning that `--gpu-arch` names another architecture than the run's
/// `nvidia.com/gpu.product` node selector.
pub const ARCH_CONTRADICTS_SELECTOR_RULE: &str = "gpu-architecture-contradicts-selector";

/// Rule id of the warning that a user override's `when` names a platform or GPU architecture
/// that never occurs.
pub const OVERRIDE_NEVER_MATCHES_RULE: &str = "override-when-never-matches";

/// Every finding the pipeline reports without a rule file, by id.
pub const BUILT_IN_RULES: &[BuiltInRule] = &[
    BuiltInRule {
        id: PLACEMENT_RULE,
        pack: "placement",
        severity: Severity::Error,
        description: "With --nodes-file, the run's groups cannot be placed on the nodes given (too few eligible nodes, too little GPU capacity, a named node missing or listed twice).",
        explanation: "check --nodes-file places the groups as render --expand does: the target's nodes that are \
schedulable and carry nvidia.com/gpu.present=true, partitioned into groups of spec.numNodes. \
The message is the controller's own. Give the run fewer nodes per group (spec.numNodes), widen \
spec.target, or check the nodes file is the fleet you mean.",
    },
    BuiltInRule {
        id: CORDONED_NODES_RULE,
        pack: "placement",
        severity: Severity::Warning,
        description: "With --nodes-file (or in the cluster), GPU nodes that the run's target selects are cordoned (spec.unschedulable) and left out of its groups.",
        explanation: "Cordoned nodes take no new pods, so the run is placed on the target's other nodes: fewer \
groups than the fleet suggests, or a placement that fails for want of nodes. Uncordon the nodes \
(kubectl uncordon NODE) if they are meant to run it, or select them on purpose: a target \
whose taintSelectors name the node.kubernetes.io/unschedulable taint keeps cordoned nodes.",
    },
    BuiltInRule {
        id: YAML_QUOTE_RULE,
        pack: "input",
        severity: Severity::Error,
        description: "An unquoted value where Kubernetes expects a string (a label or annotation value, an env value, ConfigMap data) that YAML 1.1 tools such as kubectl read differently (a warning), or that is a number or boolean in every YAML reading (an error: the API server refuses it); an unquoted YAML 1.1 boolean word (yes, no, on, off, y, n) in any string field, or a quantity with a leading zero (warnings).",
        explanation: "This tool reads YAML 1.2, where an unquoted yes stays the string yes; kubectl reads YAML 1.1, \
where yes, no, on, off, y and n are booleans, and 010 is octal 8. Numbers such as 3, 1.10 or 1e3 \
are numbers in every YAML version, not the text written, and the API server refuses a number (or \
true, false) where a string belongs: that is an error. The value is never rewritten: quote it \
(\"yes\", \"1.10\"), or write a quantity without its leading zero.",
    },
    BuiltInRule {
        id: NULL_QUANTITY_RULE,
        pack: "input",
        severity: Severity::Warning,
        description: "A resource quantity (limits or requests) is empty or null, so it is dropped as if it were not written.",
        explanation: "A null field of a WorkloadRun is dropped, as the API server drops it, so the quantity in \
force is the generated one (for nvidia.com/gpu, the GPUs per node). Under spec.overrides a null \
is a patch's \"delete this key\" and is not reported. Write the quantity you mean, or remove the \
key.",
    },
    BuiltInRule {
        id: NOT_AN_OBJECT_RULE,
        pack: "input",
        severity: Severity::Warning,
        description: "A document is not a Kubernetes object (no apiVersion, kind and metadata), so no rule checked it.",
        explanation: "Info for a mapping without kind (a values file, a kustomization); a warning for a string, \
a number, a boolean or a list, which more likely means a wrong file. Leave such files out of \
the paths given to check, or add the apiVersion and kind the document is meant to have.",
    },
    BuiltInRule {
        id: UNKNOWN_ARCH_RULE,
        pack: "input",
        severity: Severity::Warning,
        description: "check --platform of a WorkloadRun whose GPU architecture nothing names, a run whose target nodes (--nodes-file) carry no nvidia.com/gpu.product, or one whose nvidia.com/gpu.product names an architecture the gpu-defaults table has no row for (NVIDIA-Tesla-V100): its overrides and per-node defaults are the unknown architecture's.",
        explanation: "Without --nodes-file, render refuses such a run (it cannot tell which GPUs the nodes have); \
check goes on with the unknown architecture's defaults so the other findings are still reported, \
but the post-override checks (GPU limits against processes per node, NIC requests) then describe \
a run that will not happen. Pass --gpu-arch ARCH, set nvidia.com/gpu.product in \
spec.target.nodeSelector, or give --nodes-file to detect it. With --nodes-file whose target nodes \
carry no nvidia.com/gpu.product (GPU feature discovery not running on them), render and check \
both go on with the unknown architecture's defaults and warn: label the nodes, or set \
spec.gpusPerNode.",
    },
    BuiltInRule {
        id: ARCH_CONTRADICTS_SELECTOR_RULE,
        pack: "input",
        severity: Severity::Warning,
        description: "--gpu-arch names another GPU architecture than the WorkloadRun's nvidia.com/gpu.product node selector.",
        explanation: "--gpu-arch takes precedence: GPUs and NICs per node, MNNVL and the platform overrides are \
the flag's architecture's, while the pods keep the node selector and so only schedule on the \
selector's nodes, where that configuration is wrong (a 4-GPU GB300 layout on 8-GPU H100 nodes, \
say). Pass the architecture of the nodes the selector names, or fix the selector.",
    },
    BuiltInRule {
        id: OVERRIDE_NEVER_MATCHES_RULE,
        pack: "input",
        severity: Severity::Warning,
        description: "A user override's when.platform or when.gpuArchitecture names a value no run has, so the override (or that entry) never applies.",
        explanation: "when.platform and when.gpuArchitecture compare exactly with the platform and architecture \
of the run: a platform is one of the platform table's names (aws, not AWS), and an architecture \
is the gpu-products table's normalised name (gb300, not GB300 or NVIDIA-GB300). A value \
outside them never matches: under equals the override is silently skipped on every cluster. \
Write the name as the message gives it.",
    },
    BuiltInRule {
        id: LEGACY_API_GROUP_RULE,
        pack: "input",
        severity: Severity::Warning,
        description: "The document uses the older cre.nvidia.com API group; it is read as nvcre.nvidia.com.",
        explanation: "The older group is accepted and rendered as the current one. Change apiVersion to \
nvcre.nvidia.com/v1alpha1 so the manifest applies to clusters that serve only the current group.",
    },
];

/// The built-in finding with this id.
pub fn built_in_rule(id: &str) -> Option<&'static BuiltInRule> {
    BUILT_IN_RULES.iter().find(|r| r.id == id)
}
