//! The `-x` forwards of a rendered MPI trainer command.
//!
//! A trainer is `command` + `args` as written, or (when a platform adds pre-command lines)
//! `[/bin/bash, -c]` and one script whose last line is `exec` and every element Go-`%q`
//! quoted.

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
        let last = script.lines().last().unwrap_or("");
        let exec = last
            .strip_prefix("exec ")
            .ok_or_else(|| format!("the script's last line is not exec: {last:?}"))?;
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

/// Splits `"a" "b\"c"` (Go `%q` elements separated by spaces) into its strings.
fn unquote_all(text: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.peek() == Some(&' ') {
            chars.next();
        }
        match chars.next() {
            None => return Ok(out),
            Some('"') => {}
            Some(c) => return Err(format!("expected '\"', got {c:?} in {text:?}")),
        }
        let mut s = String::new();
        loop {
            match chars.next() {
                None => return Err(format!("unterminated string in {text:?}")),
                Some('"') => break,
                Some('\\') => match chars.next() {
                    Some('n') => s.push('\n'),
                    Some('t') => s.push('\t'),
                    Some('\\') => s.push('\\'),
                    Some('"') => s.push('"'),
                    Some(c) => return Err(format!("unsupported escape \\{c} in {text:?}")),
                    None => return Err(format!("dangling escape in {text:?}")),
                },
                Some(c) => s.push(c),
            }
        }
        out.push(s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_pre_command_script_is_unwrapped() {
        let t = json!({"command": ["/bin/bash", "-c"], "args": ["rm -rf /x\nexec \"mpirun\" \"-x\" \"A=a \\\"b\\\"\" \"-x\" \"B\""]});
        let argv = trainer_argv(&t).expect("argv");
        assert_eq!(argv, ["mpirun", "-x", "A=a \"b\"", "-x", "B"]);
        assert_eq!(
            forwards(&argv),
            vec![("A".into(), Some("a \"b\"".into())), ("B".into(), None)]
        );
    }
}
