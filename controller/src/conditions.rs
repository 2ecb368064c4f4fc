//! Status conditions: the exclusive execution set (`InProgress`, `Succeeded`, `Failed`) and the
//! independent `ValidationFailed`, with the transition rules both reconcilers share.

use nvcre_domain::crd::Condition;

/// Execution condition: the workload is running.
pub const IN_PROGRESS: &str = "InProgress";
/// Execution condition: the workload finished successfully.
pub const SUCCEEDED: &str = "Succeeded";
/// Execution condition: the workload failed (terminal).
pub const FAILED: &str = "Failed";
/// Independent condition: a threshold was violated.
pub const VALIDATION_FAILED: &str = "ValidationFailed";
/// Reason written on the execution conditions another one replaced.
pub const SUPERSEDED: &str = "Superseded";

/// The three mutually exclusive execution condition types, in order.
pub const EXECUTION: [&str; 3] = [IN_PROGRESS, SUCCEEDED, FAILED];

/// The condition of type `type_`, if present.
pub fn get<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether the condition of type `type_` is present with status `True`.
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    get(conditions, type_).is_some_and(|c| c.status == "True")
}

/// Whether `Succeeded` or `Failed` is True.
pub fn is_terminal(conditions: &[Condition]) -> bool {
    is_true(conditions, SUCCEEDED) || is_true(conditions, FAILED)
}

/// The execution condition that is True, if any (the `phase` column).
pub fn true_execution(conditions: &[Condition]) -> Option<&Condition> {
    EXECUTION
        .iter()
        .find_map(|t| get(conditions, t).filter(|c| c.status == "True"))
}

/// Sets one condition. `lastTransitionTime` changes to `now` only when the status changes (or
/// the condition is new). Returns whether anything changed.
pub fn set(conditions: &mut Vec<Condition>, mut condition: Condition, now: &str) -> bool {
    match conditions.iter_mut().find(|c| c.type_ == condition.type_) {
        Some(existing) => {
            condition.last_transition_time = if existing.status == condition.status {
                existing.last_transition_time.clone()
            } else {
                Some(now.to_string())
            };
            if *existing == condition {
                return false;
            }
            *existing = condition;
            true
        }
        None => {
            condition.last_transition_time = Some(now.to_string());
            conditions.push(condition);
            true
        }
    }
}

/// Sets the execution condition `type_` True with `reason` and `message`, and the other two
/// execution conditions False with reason `Superseded` and an empty message. Returns whether
/// anything changed.
pub fn set_execution(
    conditions: &mut Vec<Condition>,
    type_: &str,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: &str,
) -> bool {
    let mut changed = false;
    for t in EXECUTION {
        let c = if t == type_ {
            Condition {
                type_: t.to_string(),
                status: "True".into(),
                reason: reason.to_string(),
                message: message.to_string(),
                last_transition_time: None,
                observed_generation: generation,
            }
        } else {
            Condition {
                type_: t.to_string(),
                status: "False".into(),
                reason: SUPERSEDED.into(),
                message: String::new(),
                last_transition_time: None,
                observed_generation: generation,
            }
        };
        changed |= set(conditions, c, now);
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brief(c: &[Condition]) -> Vec<(String, String, String, String)> {
        c.iter()
            .map(|c| {
                (
                    c.type_.clone(),
                    c.status.clone(),
                    c.reason.clone(),
                    c.message.clone(),
                )
            })
            .collect()
    }

    #[test]
    fn execution_conditions_are_exclusive() {
        let mut c = Vec::new();
        assert!(set_execution(
            &mut c,
            IN_PROGRESS,
            "WorkflowCreated",
            "Workflow a created",
            Some(1),
            "t1"
        ));
        assert!(set_execution(
            &mut c,
            FAILED,
            "WorkflowFailed",
            "boom",
            Some(1),
            "t2"
        ));
        assert_eq!(
            brief(&c),
            vec![
                (
                    "InProgress".into(),
                    "False".into(),
                    "Superseded".into(),
                    "".into()
                ),
                (
                    "Succeeded".into(),
                    "False".into(),
                    "Superseded".into(),
                    "".into()
                ),
                (
                    "Failed".into(),
                    "True".into(),
                    "WorkflowFailed".into(),
                    "boom".into()
                ),
            ]
        );
        // Succeeded stayed False: its transition time is the first one.
        assert_eq!(c[1].last_transition_time.as_deref(), Some("t1"));
        assert_eq!(c[0].last_transition_time.as_deref(), Some("t2"));
        assert_eq!(c[2].last_transition_time.as_deref(), Some("t2"));
        assert_eq!(true_execution(&c).map(|c| c.type_.as_str()), Some("Failed"));
        assert!(is_terminal(&c));
    }

    #[test]
    fn setting_the_same_condition_again_changes_nothing() {
        let mut c = Vec::new();
        set_execution(&mut c, IN_PROGRESS, "R", "m", None, "t1");
        assert!(!set_execution(&mut c, IN_PROGRESS, "R", "m", None, "t2"));
        assert_eq!(c[0].last_transition_time.as_deref(), Some("t1"));
    }
}
