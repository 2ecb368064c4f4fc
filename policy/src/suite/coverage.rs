//! Which packs, tables and rules of a rule set the suites exercise (`test --require-tests`).

use std::collections::{BTreeMap, HashSet};

use nvcre_engine::RuleSet;

use super::{Case, Expectation, Suite, WantFinding};

/// Which packs, tables and rules the suites exercise.
#[derive(Debug, Clone, Default)]
pub struct Coverage {
    /// One entry per rule pack of the rule set, in load order.
    pub packs: Vec<PackCoverage>,
    /// One entry per table, in load order.
    pub tables: Vec<TableCoverage>,
    /// One entry per LogProfile, by name (cases in its folder, `tests/<profile>/`).
    pub profiles: Vec<TableCoverage>,
}

/// Coverage of one rule pack.
#[derive(Debug, Clone)]
pub struct PackCoverage {
    /// The pack's `metadata.name`.
    pub name: String,
    /// Cases in the pack's folder or naming one of its rules in `want_findings`.
    pub cases: usize,
    /// Validating rules no case names in `want_findings` (mutate-only rules count as tested
    /// when the pack's folder has a case).
    pub untested_rules: Vec<String>,
}

/// Coverage of one table.
#[derive(Debug, Clone)]
pub struct TableCoverage {
    /// The table's `metadata.name`.
    pub name: String,
    /// Cases in the table's folder.
    pub cases: usize,
}

impl Coverage {
    /// Names of packs and tables without any case.
    pub fn untested(&self) -> Vec<String> {
        self.packs
            .iter()
            .filter(|p| p.cases == 0)
            .map(|p| format!("pack {}", p.name))
            .chain(
                self.tables
                    .iter()
                    .filter(|t| t.cases == 0)
                    .map(|t| format!("table {}", t.name)),
            )
            .chain(
                self.profiles
                    .iter()
                    .filter(|t| t.cases == 0)
                    .map(|t| format!("log profile {}", t.name)),
            )
            .collect()
    }
}

/// Coverage of `rules` by `suites`: a pack is tested by the cases in its folder
/// (`tests/<pack>/`) and the cases naming one of its rules in `want_findings`; a table by the
/// cases in its folder; a rule by the cases naming it.
pub fn coverage(rules: &RuleSet, suites: &[Suite]) -> Coverage {
    let mut by_folder: BTreeMap<&str, usize> = BTreeMap::new();
    let mut named: HashSet<&str> = HashSet::new();
    for s in suites {
        if let Some(folder) = s.folder() {
            *by_folder.entry(folder).or_default() += s.cases.len();
        }
    }
    for s in suites {
        for c in &s.cases {
            named.extend(want_rule_ids(c));
        }
    }
    let mut packs = Vec::new();
    for pack in rules.packs() {
        let ids: HashSet<&str> = pack.rules.iter().map(|r| r.id.as_str()).collect();
        let in_folder = by_folder.get(pack.name.as_str()).copied().unwrap_or(0);
        let mut cases = in_folder;
        for s in suites {
            if s.folder() == Some(pack.name.as_str()) {
                continue;
            }
            cases += s
                .cases
                .iter()
                .filter(|c| want_rule_ids(c).any(|id| ids.contains(id)))
                .count();
        }
        packs.push(PackCoverage {
            name: pack.name.clone(),
            cases,
            untested_rules: pack
                .rules
                .iter()
                // A rule that only mutates never yields a finding: its pack's cases test it.
                .filter(|r| {
                    let tested = named.contains(r.id.as_str())
                        || (r.expression().is_none() && in_folder > 0);
                    !tested
                })
                .map(|r| r.id.clone())
                .collect(),
        });
    }
    let tables = rules
        .tables
        .iter()
        .map(|t| TableCoverage {
            name: t.name.clone(),
            cases: by_folder.get(t.name.as_str()).copied().unwrap_or(0),
        })
        .collect();
    // A profile that does not compile fails the load before coverage is asked.
    let profiles = crate::measure::LogProfiles::from_rules(rules)
        .map(|p| {
            p.names()
                .map(|n| TableCoverage {
                    name: n.to_string(),
                    cases: by_folder.get(n).copied().unwrap_or(0),
                })
                .collect()
        })
        .unwrap_or_default();
    Coverage {
        packs,
        tables,
        profiles,
    }
}

fn want_rule_ids(c: &Case) -> impl Iterator<Item = &str> {
    let list: &[WantFinding] = match &c.expect {
        Expectation::Findings(f) => f,
        _ => &[],
    };
    list.iter().map(|w| w.rule_id.as_str())
}
