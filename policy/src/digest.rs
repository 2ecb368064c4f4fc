// The digest of a rule set's files, shared by the crate and its build script (which includes
// this file to digest the embedded rules): one definition, so the two cannot drift apart.

/// `sha256:<hex>` over each file's path below the set's root and its text, each length-prefixed
/// (no two different sets hash the same bytes), in the order of the `(path, text)` pairs.
pub fn rules_digest<'a>(files: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    for (name, text) in files {
        ctx.update(&(name.len() as u64).to_be_bytes());
        ctx.update(name.as_bytes());
        ctx.update(&(text.len() as u64).to_be_bytes());
        ctx.update(text.as_bytes());
    }
    let hex: String = ctx
        .finish()
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}
