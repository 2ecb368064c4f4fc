//! Rules reload from a directory in the kubelet ConfigMap layout (`..<timestamp>/` holding the
//! files, `..data` → that directory, each key a symlink through `..data`): a good change is put
//! in force, a broken one is refused and the last good set stays.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nvcre_controller::rules::{Reload, RulesHolder, RulesSource};

/// Every rule file of the repository's `rules/` (outside `tests/`), flattened to
/// `<dir>-<file>` keys as a ConfigMap holds them.
fn rule_files() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../rules");
    let mut out = Vec::new();
    for dir in std::fs::read_dir(&root).expect("rules dir").flatten() {
        let name = dir.file_name().to_string_lossy().to_string();
        if name == "tests" || !dir.path().is_dir() {
            continue;
        }
        for f in std::fs::read_dir(dir.path()).expect("dir").flatten() {
            let file = f.file_name().to_string_lossy().to_string();
            if file.ends_with(".yaml") {
                out.push((
                    format!("{name}-{file}"),
                    std::fs::read_to_string(f.path()).expect("read"),
                ));
            }
        }
    }
    out.sort();
    out
}

/// Writes a new `..<version>` directory and atomically repoints `..data` at it, as the
/// kubelet does; the key symlinks are created once.
fn publish(root: &Path, version: &str, files: &[(String, String)]) {
    let dir = root.join(format!("..{version}"));
    std::fs::create_dir(&dir).expect("version dir");
    for (k, v) in files {
        std::fs::write(dir.join(k), v).expect("write");
    }
    let tmp = root.join("..data_tmp");
    symlink(format!("..{version}"), &tmp).expect("symlink");
    std::fs::rename(&tmp, root.join("..data")).expect("swap");
    for (k, _) in files {
        let link = root.join(k);
        if std::fs::symlink_metadata(&link).is_err() {
            symlink(PathBuf::from("..data").join(k), &link).expect("key link");
        }
    }
}

#[test]
fn a_broken_update_is_refused_and_the_last_good_set_stays_in_force() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    let good = rule_files();
    assert!(good.len() >= 10, "rule files found: {}", good.len());
    publish(root, "2026_01_01_v1", &good);
    let holder = RulesHolder::load(RulesSource::Dir(root.to_path_buf())).expect("initial load");
    let first = holder.current();
    assert_eq!(holder.poll(), Reload::Unchanged);

    // A new version where one pack no longer compiles.
    let mut broken = good.clone();
    let (_, text) = broken
        .iter_mut()
        .find(|(k, _)| k == "admission-workloadrun.yaml")
        .expect("admission pack");
    *text = text.replacen("expression: ", "expression: this is not CEL ((( ", 1);
    publish(root, "2026_01_01_v2", &broken);
    let Reload::Refused(errors) = holder.poll() else {
        panic!("the broken set must be refused")
    };
    assert!(errors.contains("admission-workloadrun.yaml"), "{errors}");
    assert!(
        Arc::ptr_eq(&first, &holder.current()),
        "last good set in force"
    );
    assert_eq!(holder.last_error(), Some(errors));
    // Unchanged on disk: not retried, still refused.
    assert_eq!(holder.poll(), Reload::Unchanged);
    assert!(holder.last_error().is_some());

    // A fixed version loads and replaces the set.
    publish(root, "2026_01_01_v3", &good);
    assert_eq!(holder.poll(), Reload::Reloaded);
    assert!(!Arc::ptr_eq(&first, &holder.current()));
    assert_eq!(holder.last_error(), None);
}

#[test]
fn built_in_rules_never_reload() {
    let holder = RulesHolder::load(RulesSource::BuiltIn).expect("built-in");
    assert_eq!(holder.poll(), Reload::Unchanged);
    assert_eq!(holder.last_error(), None);
}

/// A ConfigMap that lost a key (the kubelet removes its symlink) is a set without a table the
/// pipeline renders: refused whole, the last good set stays.
#[test]
fn an_update_that_drops_a_table_is_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    let good = rule_files();
    publish(root, "2026_01_01_v1", &good);
    let holder = RulesHolder::load(RulesSource::Dir(root.to_path_buf())).expect("initial load");
    let first = holder.current();
    let fewer: Vec<(String, String)> = good
        .iter()
        .filter(|(k, _)| k != "defaults-gpu-defaults.yaml")
        .cloned()
        .collect();
    publish(root, "2026_01_01_v2", &fewer);
    std::fs::remove_file(root.join("defaults-gpu-defaults.yaml")).expect("kubelet drops the key");
    let Reload::Refused(errors) = holder.poll() else {
        panic!("a set without gpu-defaults must be refused")
    };
    assert_eq!(
        errors,
        format!(
            "rule pack error: {}: no rule file defines table \"gpu-defaults\" (GPUs and NICs per \
             node and the MNNVL default, by architecture and platform); the pipeline renders it, \
             so the set is refused",
            root.display()
        )
    );
    assert!(Arc::ptr_eq(&first, &holder.current()));
}

/// `file` of `files` with its `entries:` list emptied.
fn emptied(files: &[(String, String)], file: &str) -> Vec<(String, String)> {
    files
        .iter()
        .map(|(k, v)| {
            let mut v = v.clone();
            if k == file {
                let at = v.find("entries:").expect("entries");
                v.truncate(at);
                v.push_str("entries: []\n");
            }
            (k.clone(), v)
        })
        .collect()
}

/// A set that loads but cannot render (a table emptied of the rows every build needs) fails
/// its trial renders: refused whole, at start and on reload, the last good set staying.
#[test]
fn an_update_that_loads_but_cannot_render_is_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    let good = rule_files();
    publish(root, "2026_01_01_v1", &good);
    let holder = RulesHolder::load(RulesSource::Dir(root.to_path_buf())).expect("initial load");
    let first = holder.current();

    let no_defaults = emptied(&good, "defaults-gpu-defaults.yaml");
    publish(root, "2026_01_01_v2", &no_defaults);
    let Reload::Refused(errors) = holder.poll() else {
        panic!("a set whose gpu-defaults has no rows must be refused")
    };
    assert_eq!(
        errors,
        format!(
            "rule pack error: {}/defaults-gpu-defaults.yaml: entry unknown: the set cannot serve: \
             a trial render of a torch WorkloadRun (one GPU node without a product label or \
             provider id) fails: table gpu-defaults: no row for an unknown architecture \
             (gpuArchitecture: \"\") (the table has no rows)",
            root.display()
        )
    );
    assert!(Arc::ptr_eq(&first, &holder.current()));

    // An emptied product table would size every H100 run as an unknown architecture.
    let no_products = emptied(&good, "defaults-gpu-products.yaml");
    publish(root, "2026_01_01_v3", &no_products);
    let Reload::Refused(errors) = holder.poll() else {
        panic!("a set whose gpu-products has no rows must be refused")
    };
    assert_eq!(
        errors,
        format!(
            "rule pack error: {}/defaults-gpu-products.yaml: the set cannot serve: table \
             gpu-products: no row maps the GPU architecture \"a100\", which table gpu-defaults \
             makes selectable (entry a100), so --gpu-arch a100 would be refused and every node's \
             product would read as an unknown architecture; add a row that maps it to itself \
             (the table has no rows)",
            root.display()
        )
    );
    assert!(Arc::ptr_eq(&first, &holder.current()));

    // Started on such a set, the controller does not start.
    let other = tempfile::tempdir().expect("tempdir");
    publish(other.path(), "2026_01_01_v1", &no_defaults);
    let refused = RulesHolder::load(RulesSource::Dir(other.path().to_path_buf()))
        .map(|_| ())
        .map_err(|e| e.replace(&other.path().display().to_string(), "DIR"));
    assert_eq!(
        refused,
        Err(
            "rule pack error: DIR/defaults-gpu-defaults.yaml: entry unknown: the set cannot \
             serve: a trial render of a torch WorkloadRun (one GPU node without a product label \
             or provider id) fails: table gpu-defaults: no row for an unknown architecture \
             (gpuArchitecture: \"\") (the table has no rows)"
                .to_string()
        )
    );
}
