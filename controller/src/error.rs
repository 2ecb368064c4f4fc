//! Reconcile errors and the requeue policy for each kind.

use std::time::Duration;

use kube::runtime::controller::Action;

/// Why a reconcile failed. Decisions themselves do not fail (a bad spec is a condition on the
/// object); these are the failures of talking to the API server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed (network, server error, conflict, forbidden).
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// An object could not be (de)serialized: a bug or an incompatible object version.
    #[error("serialization: {0}")]
    Serialization(#[from] serde_json::Error),
    /// A child object of the deterministic name exists and another owner controls it; it is
    /// never adopted.
    #[error("{kind} {name:?} exists and is controlled by another owner; refusing to adopt it")]
    OwnedByOther {
        /// Kind of the child.
        kind: String,
        /// Name of the child.
        name: String,
    },
    /// A manifest to apply lacks `apiVersion`, `kind` or `metadata.name`.
    #[error("manifest without {0}")]
    InvalidManifest(&'static str),
    /// A Node object could not be read as a node (discovery input).
    #[error("nodes: {0}")]
    Nodes(String),
    /// The rules could not be loaded at start.
    #[error("rules: {0}")]
    Rules(String),
    /// Leader election failed.
    #[error("leader election: {0}")]
    Lease(String),
    /// The health/metrics server could not bind or serve.
    #[error("http server: {0}")]
    Http(#[from] std::io::Error),
}

impl Error {
    /// The metric label of the kind (`kube`, `serialization`, …).
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kube",
            Error::Serialization(_) => "serialization",
            Error::OwnedByOther { .. } => "owned_by_other",
            Error::InvalidManifest(_) => "invalid_manifest",
            Error::Nodes(_) => "nodes",
            Error::Rules(_) => "rules",
            Error::Lease(_) => "lease",
            Error::Http(_) => "http",
        }
    }

    /// How long to wait before retrying: conflicts quickly, API errors after a short backoff,
    /// ownership conflicts and malformed objects slowly (a person has to act).
    pub fn requeue_after(&self) -> Duration {
        match self {
            Error::Kube(kube::Error::Api(s)) if s.code == 409 => Duration::from_secs(1),
            Error::Kube(_) => Duration::from_secs(5),
            Error::OwnedByOther { .. } => Duration::from_secs(60),
            Error::Serialization(_) | Error::InvalidManifest(_) | Error::Nodes(_) => {
                Duration::from_secs(300)
            }
            Error::Rules(_) | Error::Lease(_) | Error::Http(_) => Duration::from_secs(30),
        }
    }

    /// The controller [`Action`] for this error.
    pub fn action(&self) -> Action {
        Action::requeue(self.requeue_after())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requeue_policy_by_kind() {
        let owned = Error::OwnedByOther {
            kind: "TrainJob".into(),
            name: "wf-job".into(),
        };
        assert_eq!(owned.requeue_after(), Duration::from_secs(60));
        assert_eq!(
            owned.to_string(),
            "TrainJob \"wf-job\" exists and is controlled by another owner; refusing to adopt it"
        );
        assert_eq!(owned.kind(), "owned_by_other");
        let conflict = Error::Kube(kube::Error::Api(
            kube::core::Status::failure("conflict", "Conflict")
                .with_code(409)
                .boxed(),
        ));
        assert_eq!(conflict.requeue_after(), Duration::from_secs(1));
        assert_eq!(
            Error::InvalidManifest("kind").requeue_after(),
            Duration::from_secs(300)
        );
    }
}
