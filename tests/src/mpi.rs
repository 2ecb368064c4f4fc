//! The `-x` forwards of a rendered MPI trainer command.
//!
//! A trainer is `command` + `args` as written, or (when a platform adds pre-command lines)
//! `[/bin/bash, -c]` and one script whose last line is `exec` and every element in single
//! quotes (each `'` inside written `'\''`).

use serde_json::Value;

/// The trainer's argv: `command` then `args`, unwrapping a `/bin/bash -c` pre-command script.
///
/// # Errors
/// A trainer without command, or an `exec` line that does not unquote.
pub fn trainer_argv(trainer: &Value) -> Result<Vec<String>, String> {
    let strings = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    let command = strings(trainer.get("command"));
    let args = strings(trainer.get("args"));
    if command.is_empty() {
        return Err("the trainer has no command".into());
    }
    if command == ["/bin/bash", "-c"] {
        let script = args
            .first()
            .ok_or("a /bin/bash -c trainer without a script")?;
        // The exec line is the first that starts `exec '`; a quoted element may span lines.
        let exec = script
            .strip_prefix("exec ")
            .or_else(|| script.find("\nexec '").map(|at| &script[at + 6..]))
            .ok_or_else(|| format!("the script has no exec line: {script:?}"))?;
        return unquote_all(exec);
    }
    Ok(command.into_iter().chain(args).collect())
}

/// Every `-x` operand of `argv`, in order: `(name, Some(value))` for `NAME=value`,
/// `(name, None)` for a bare `NAME`.
pub fn forwards(argv: &[String]) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    let mut it = argv.iter();
    while let Some(a) = it.next() {
        if a == "-x"
            && let Some(op) = it.next()
        {
            out.push(match op.split_once('=') {
                Some((n, v)) => (n.to_string(), Some(v.to_string())),
                None => (op.clone(), None),
            });
        }
    }
    out
}

/// Splits `'a' 'b'\''c'` (shell words made of single-quoted pieces and `\'`, separated by
/// spaces) into its strings.
fn unquote_all(text: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.peek() == Some(&' ') {
            chars.next();
        }
        if chars.peek().is_none() {
            return Ok(out);
        }
        let mut word = String::new();
        loop {
            match chars.next() {
                None | Some(' ') => break,
                Some('\'') => loop {
                    match chars.next() {
                        None => return Err(format!("unterminated quote in {text:?}")),
                        Some('\'') => break,
                        Some(c) => word.push(c),
                    }
                },
                Some('\\') => match chars.next() {
                    Some('\'') => word.push('\''),
                    other => return Err(format!("unexpected escape {other:?} in {text:?}")),
                },
                Some(c) => return Err(format!("unquoted {c:?} in {text:?}")),
            }
        }
        out.push(word);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_pre_command_script_is_unwrapped() {
        let t = json!({"command": ["/bin/bash", "-c"], "args": [r"rm -rf /x
exec 'mpirun' '-x' 'A=a '\''b'\''' '' '-x' 'B'"]});
        let argv = trainer_argv(&t).expect("argv");
        assert_eq!(argv, ["mpirun", "-x", "A=a 'b'", "", "-x", "B"]);
        assert_eq!(
            forwards(&argv),
            vec![("A".into(), Some("a 'b'".into())), ("B".into(), None)]
        );
    }
}
