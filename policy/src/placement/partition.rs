//! Pinned partitioning: the eligible nodes into job [`Group`]s of nodesPerJob, by name order
//! or packed by topology domain, with overflow groups so that every node is tested.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde_json::Value;

use super::PlacementError;
use crate::nodes::Node;

/// One job group.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Group {
    /// `group-<i>` or `group-<k>-overflow`.
    pub name: String,
    /// Pinned: the group's nodes, sorted. Unpinned: empty.
    pub nodes: Vec<String>,
    /// Topology domains the group spans, sorted (topology partitioning only).
    pub domains: Vec<String>,
    /// An overflow group (re-uses nodes of earlier groups to fill up).
    pub overflow: bool,
    /// In apply order: the group's renamed dependency copies, then its TrainJob.
    pub manifests: Vec<Value>,
}

/// Pinned partitioning of `nodes` (any order; sorted by name first) into groups of
/// `nodes_per_job`. The returned groups have no manifests.
///
/// - No `topology_key`: consecutive chunks `group-0..`; a remainder forms
///   `group-<k>-overflow` from the leftover nodes plus the last nodes of the last full group
///   (sorted), or, when no full group exists, a single partial `group-0` of all nodes.
/// - `topology_key` with `strict_domain`: one group per domain at its natural size, domains
///   by size descending then name.
/// - `topology_key`: groups packed into as few domains as possible, overflow groups re-using
///   tested nodes of the same domains until every node is covered; when the largest domains
///   cannot fill even one group, a single partial `group-0` of all nodes (which may exceed
///   nodesPerJob). Every overflow group is full: its domain pools are refreshed per overflow
///   group, where the original drains them and can leave a later overflow group short.
///
/// Every node appears in at least one group.
///
/// # Errors
/// `nodesPerJob must be >= 1, got <n>`, `no nodes provided`,
/// `node "<n>" missing topology label "<key>"`.
///
/// # Example
/// ```
/// use nvcre_domain::{Node, place_groups};
/// let nodes: Vec<Node> = (0..5).map(|i| Node { name: format!("node-{i}"), ..Node::default() }).collect();
/// let groups = place_groups(&nodes, 2, None, false)?;
/// let names: Vec<_> = groups.iter().map(|g| g.name.as_str()).collect();
/// assert_eq!(names, ["group-0", "group-1", "group-2-overflow"]);
/// assert_eq!(groups[2].nodes, ["node-3", "node-4"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn place_groups(
    nodes: &[Node],
    nodes_per_job: i64,
    topology_key: Option<&str>,
    strict_domain: bool,
) -> Result<Vec<Group>, PlacementError> {
    if nodes_per_job < 1 {
        return Err(PlacementError::InvalidNodesPerJob { got: nodes_per_job });
    }
    if nodes.is_empty() {
        return Err(PlacementError::NoNodes);
    }
    let npj = usize::try_from(nodes_per_job).unwrap_or(usize::MAX);
    let mut sorted: Vec<&Node> = nodes.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    match topology_key.filter(|k| !k.is_empty()) {
        None => Ok(partition_simple(&sorted, npj)),
        Some(key) => partition_topology(&sorted, npj, key, strict_domain),
    }
}

/// A group without manifests.
pub(super) fn group(
    name: String,
    nodes: Vec<String>,
    domains: Vec<String>,
    overflow: bool,
) -> Group {
    Group {
        name,
        nodes,
        domains,
        overflow,
        manifests: Vec::new(),
    }
}

/// Chunking by name order (the original's "Simple" mode).
fn partition_simple(sorted: &[&Node], npj: usize) -> Vec<Group> {
    let names: Vec<String> = sorted.iter().map(|n| n.name.clone()).collect();
    let full = names.len() / npj;
    let remainder = names.len() % npj;
    let mut groups: Vec<Group> = names
        .chunks(npj)
        .take(full)
        .enumerate()
        .map(|(i, chunk)| group(format!("group-{i}"), chunk.to_vec(), Vec::new(), false))
        .collect();
    if remainder > 0 {
        if full == 0 {
            groups.push(group("group-0".to_string(), names, Vec::new(), false));
        } else {
            let leftover = names.iter().skip(full.saturating_mul(npj)).cloned();
            let borrowed: Vec<String> = groups
                .last()
                .map(|g| g.nodes.iter().skip(remainder).cloned().collect())
                .unwrap_or_default();
            let mut overflow: Vec<String> = leftover.chain(borrowed).collect();
            overflow.sort();
            groups.push(group(
                format!("group-{full}-overflow"),
                overflow,
                Vec::new(),
                true,
            ));
        }
    }
    groups
}

/// Topology-aware packing (the original's "StrictDomain" and "Topology" modes).
fn partition_topology(
    sorted: &[&Node],
    npj: usize,
    key: &str,
    strict_domain: bool,
) -> Result<Vec<Group>, PlacementError> {
    let mut by_domain: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut domain_of: BTreeMap<String, String> = BTreeMap::new();
    for node in sorted {
        let domain = node
            .labels
            .get(key)
            .filter(|d| !d.is_empty())
            .ok_or_else(|| PlacementError::MissingTopologyLabel {
                node: node.name.clone(),
                key: key.to_string(),
            })?;
        by_domain
            .entry(domain.clone())
            .or_default()
            .push(node.name.clone());
        domain_of.insert(node.name.clone(), domain.clone());
    }
    // Domains by size descending, then name (BTreeMap order is by name; the sort is stable).
    let mut domains: Vec<(String, Vec<String>)> = by_domain.into_iter().collect();
    domains.sort_by_key(|d| std::cmp::Reverse(d.1.len()));

    if strict_domain {
        return Ok(domains
            .into_iter()
            .enumerate()
            .map(|(i, (d, nodes))| group(format!("group-{i}"), nodes, vec![d], false))
            .collect());
    }

    let largest = domains.first().map_or(1, |d| d.1.len()).max(1);
    let max_domains = npj.div_ceil(largest);
    let mut pools: BTreeMap<String, VecDeque<String>> = domains
        .iter()
        .map(|(d, nodes)| (d.clone(), nodes.iter().cloned().collect()))
        .collect();

    let mut groups = Vec::new();
    loop {
        let mut available: Vec<(String, usize)> = pools
            .iter()
            .filter(|(_, p)| !p.is_empty())
            .map(|(d, p)| (d.clone(), p.len()))
            .collect();
        available.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let total: usize = available.iter().map(|a| a.1).sum();
        if total == 0 || total < npj {
            break;
        }
        let top: usize = available.iter().take(max_domains).map(|a| a.1).sum();
        if top < npj {
            break;
        }
        let mut nodes = Vec::with_capacity(npj);
        let mut used = Vec::new();
        for (domain, _) in available.iter().take(max_domains) {
            let remaining = npj.saturating_sub(nodes.len());
            if remaining == 0 {
                break;
            }
            if let Some(pool) = pools.get_mut(domain) {
                let take = remaining.min(pool.len());
                nodes.extend(pool.drain(..take));
                used.push(domain.clone());
            }
        }
        nodes.sort();
        used.sort();
        groups.push(group(format!("group-{}", groups.len()), nodes, used, false));
    }

    let untested: BTreeSet<String> = pools.values().flatten().cloned().collect();
    if untested.is_empty() {
        return Ok(groups);
    }
    if groups.is_empty() {
        let nodes: Vec<String> = untested.iter().cloned().collect();
        let doms: BTreeSet<String> = nodes
            .iter()
            .filter_map(|n| domain_of.get(n).cloned())
            .collect();
        groups.push(group(
            "group-0".to_string(),
            nodes,
            doms.into_iter().collect(),
            false,
        ));
        return Ok(groups);
    }
    let full = groups.len();
    groups.extend(overflow_groups(&domains, untested, npj, full));
    Ok(groups)
}

/// Overflow groups for the nodes full groups left untested: each fills from the domains with
/// the most untested nodes, untested nodes first, then already-tested nodes of those domains.
///
/// Each overflow group draws from fresh per-domain pools, so every overflow group has
/// exactly `npj` nodes (at least one full group exists, so the fleet holds `npj` nodes). The
/// original drains its pools across overflow groups, which can leave a later overflow group
/// short of nodesPerJob; the first overflow group is the same either way.
fn overflow_groups(
    domains: &[(String, Vec<String>)],
    mut untested: BTreeSet<String>,
    npj: usize,
    first_index: usize,
) -> Vec<Group> {
    let mut out = Vec::new();
    while !untested.is_empty() {
        // (domain, untested count, pool: untested first then re-usable, both in name order)
        let mut racks: Vec<(&String, usize, Vec<&String>)> = domains
            .iter()
            .map(|(d, nodes)| {
                let (fresh, reused): (Vec<&String>, Vec<&String>) =
                    nodes.iter().partition(|n| untested.contains(*n));
                let count = fresh.len();
                (d, count, fresh.into_iter().chain(reused).collect())
            })
            .collect();
        racks.sort_by(|a, b| {
            b.1.cmp(&a.1)
                .then_with(|| b.2.len().cmp(&a.2.len()))
                .then_with(|| a.0.cmp(b.0))
        });
        let mut nodes: Vec<String> = Vec::with_capacity(npj);
        let mut used = Vec::new();
        for (domain, _, pool) in &racks {
            if nodes.len() >= npj {
                break;
            }
            if pool.is_empty() {
                continue;
            }
            let take = npj.saturating_sub(nodes.len()).min(pool.len());
            nodes.extend(pool.iter().take(take).map(|n| (*n).clone()));
            used.push((*domain).clone());
        }
        let before = untested.len();
        for n in &nodes {
            untested.remove(n);
        }
        if untested.len() == before {
            break;
        }
        nodes.sort();
        used.sort();
        out.push(group(
            format!("group-{}-overflow", first_index.saturating_add(out.len())),
            nodes,
            used,
            true,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::fixtures::*;

    #[test]
    fn overflow_borrows_from_last_full_group() {
        let groups = place_groups(&h100(5), 2, None, false).unwrap();
        assert_eq!(groups[0].nodes, ["node-0", "node-1"]);
        assert_eq!(groups[1].nodes, ["node-2", "node-3"]);
        assert_eq!(groups[2].nodes, ["node-3", "node-4"]);
        assert!(groups[2].overflow && !groups[1].overflow);
        let groups = place_groups(&h100(7), 3, None, false).unwrap();
        assert_eq!(groups[2].name, "group-2-overflow");
        assert_eq!(groups[2].nodes, ["node-4", "node-5", "node-6"]);
    }

    #[test]
    fn single_partial_group_when_no_full_group() {
        let groups = place_groups(&h100(3), 5, None, false).unwrap();
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].name, "group-0");
        assert_eq!(groups[0].nodes.len(), 3);
        assert!(!groups[0].overflow);
    }

    macro_rules! partition_error {
        ($($name:ident: $nodes:expr, $npj:expr, $key:expr => $msg:expr;)*) => {$(
            #[test]
            fn $name() {
                let err = place_groups(&$nodes, $npj, $key, false).unwrap_err();
                assert_eq!(err.to_string(), $msg);
            }
        )*};
    }

    partition_error! {
        perr_zero: h100(4), 0, None => "nodesPerJob must be >= 1, got 0";
        perr_negative: h100(4), -2, None => "nodesPerJob must be >= 1, got -2";
        perr_no_nodes: Vec::<Node>::new(), 2, None => "no nodes provided";
        perr_missing_label: h100(2), 2, Some("topology.kubernetes.io/rack") => "node \"node-0\" missing topology label \"topology.kubernetes.io/rack\"";
    }

    #[test]
    fn topology_overflow_reuses_largest_rack() {
        let nodes = racked(&[
            ("node-r1-0", "rack-1"),
            ("node-r1-1", "rack-1"),
            ("node-r1-2", "rack-1"),
            ("node-r1-3", "rack-1"),
            ("node-r2-0", "rack-2"),
            ("node-r2-1", "rack-2"),
            ("node-r2-2", "rack-2"),
            ("node-r2-3", "rack-2"),
            ("node-r3-0", "rack-3"),
            ("node-r3-1", "rack-3"),
        ]);
        let groups = place_groups(&nodes, 4, Some("topology.kubernetes.io/rack"), false).unwrap();
        assert_eq!(
            summary(&groups),
            vec![
                (
                    "group-0".into(),
                    s(&["node-r1-0", "node-r1-1", "node-r1-2", "node-r1-3"]),
                    s(&["rack-1"]),
                    false
                ),
                (
                    "group-1".into(),
                    s(&["node-r2-0", "node-r2-1", "node-r2-2", "node-r2-3"]),
                    s(&["rack-2"]),
                    false
                ),
                (
                    "group-2-overflow".into(),
                    s(&["node-r1-0", "node-r1-1", "node-r3-0", "node-r3-1"]),
                    s(&["rack-1", "rack-3"]),
                    true
                ),
            ]
        );
    }

    #[test]
    fn topology_packs_into_fewest_domains() {
        let nodes = racked(&[
            ("node-r1-0", "rack-1"),
            ("node-r1-1", "rack-1"),
            ("node-r2-0", "rack-2"),
            ("node-r2-1", "rack-2"),
            ("node-r3-0", "rack-3"),
            ("node-r3-1", "rack-3"),
            ("node-r4-0", "rack-4"),
            ("node-r4-1", "rack-4"),
            ("node-r5-0", "rack-5"),
            ("node-r5-1", "rack-5"),
            ("node-r6-0", "rack-6"),
            ("node-r6-1", "rack-6"),
        ]);
        let groups = place_groups(&nodes, 5, Some("topology.kubernetes.io/rack"), false).unwrap();
        assert_eq!(
            summary(&groups),
            vec![
                (
                    "group-0".into(),
                    s(&[
                        "node-r1-0",
                        "node-r1-1",
                        "node-r2-0",
                        "node-r2-1",
                        "node-r3-0"
                    ]),
                    s(&["rack-1", "rack-2", "rack-3"]),
                    false
                ),
                (
                    "group-1".into(),
                    s(&[
                        "node-r4-0",
                        "node-r4-1",
                        "node-r5-0",
                        "node-r5-1",
                        "node-r6-0"
                    ]),
                    s(&["rack-4", "rack-5", "rack-6"]),
                    false
                ),
                (
                    "group-2-overflow".into(),
                    s(&[
                        "node-r1-0",
                        "node-r3-0",
                        "node-r3-1",
                        "node-r6-0",
                        "node-r6-1"
                    ]),
                    s(&["rack-1", "rack-3", "rack-6"]),
                    true
                ),
            ]
        );
    }

    #[test]
    fn topology_later_overflow_groups_stay_full() {
        // The original drains its pools across overflow groups, which would make the third
        // overflow group [a3, c1]; refreshed pools keep it at nodesPerJob.
        let nodes = racked(&[
            ("a0", "A"),
            ("a1", "A"),
            ("a2", "A"),
            ("a3", "A"),
            ("a4", "A"),
            ("b0", "B"),
            ("b1", "B"),
            ("b2", "B"),
            ("c0", "C"),
            ("c1", "C"),
        ]);
        let groups = place_groups(&nodes, 4, Some("topology.kubernetes.io/rack"), false).unwrap();
        assert_eq!(
            summary(&groups),
            vec![
                (
                    "group-0".into(),
                    s(&["a0", "a1", "a2", "a3"]),
                    s(&["A"]),
                    false
                ),
                (
                    "group-1-overflow".into(),
                    s(&["b0", "b1", "b2", "c0"]),
                    s(&["B", "C"]),
                    true
                ),
                (
                    "group-2-overflow".into(),
                    s(&["a0", "a1", "a2", "a4"]),
                    s(&["A"]),
                    true
                ),
                (
                    "group-3-overflow".into(),
                    s(&["a0", "a1", "c0", "c1"]),
                    s(&["A", "C"]),
                    true
                ),
            ]
        );
    }

    #[test]
    fn topology_partial_group_when_nothing_fills() {
        let nodes = racked(&[("a", "r1"), ("b", "r2"), ("c", "r2")]);
        let groups = place_groups(&nodes, 4, Some("topology.kubernetes.io/rack"), false).unwrap();
        assert_eq!(
            summary(&groups),
            vec![(
                "group-0".into(),
                s(&["a", "b", "c"]),
                s(&["r1", "r2"]),
                false
            )]
        );
    }

    #[test]
    fn strict_domain_one_group_per_domain() {
        let nodes = racked(&[
            ("a", "r2"),
            ("b", "r1"),
            ("c", "r1"),
            ("d", "r3"),
            ("e", "r3"),
        ]);
        let groups = place_groups(&nodes, 2, Some("topology.kubernetes.io/rack"), true).unwrap();
        assert_eq!(
            summary(&groups),
            vec![
                ("group-0".into(), s(&["b", "c"]), s(&["r1"]), false),
                ("group-1".into(), s(&["d", "e"]), s(&["r3"]), false),
                ("group-2".into(), s(&["a"]), s(&["r2"]), false),
            ]
        );
    }
}
