//! The colour decision of every command: `--color=auto|always|never`, made once with
//! `anstream` (which honours `NO_COLOR`, `CLICOLOR`, `CLICOLOR_FORCE` and `TERM=dumb` under
//! `auto`) and read per stream.

use anstream::ColorChoice;
use anstyle::{AnsiColor, Style};

/// When to colour output (`--color`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ColorWhen {
    // (Plain comments: doc comments would turn `--help` into a list of the values.)
    // A stream is coloured only when it is a terminal, unless `NO_COLOR` is set (non-empty),
    // `CLICOLOR=0` or `TERM=dumb`; `CLICOLOR_FORCE` colours pipes too.
    #[default]
    #[allow(missing_docs)]
    Auto,
    // Always colour (files written with `-o FORMAT=PATH` never are).
    #[allow(missing_docs)]
    Always,
    // Never colour.
    #[allow(missing_docs)]
    Never,
}

/// Records the choice for the whole process.
pub fn init(when: ColorWhen) {
    ColorChoice::write_global(match when {
        ColorWhen::Auto => ColorChoice::Auto,
        ColorWhen::Always => ColorChoice::Always,
        ColorWhen::Never => ColorChoice::Never,
    });
}

/// True when standard output is to be coloured.
pub fn stdout() -> bool {
    anstream::AutoStream::choice(&std::io::stdout()) != ColorChoice::Never
}

/// True when standard error is to be coloured.
pub fn stderr() -> bool {
    anstream::AutoStream::choice(&std::io::stderr()) != ColorChoice::Never
}

/// The style of a severity word (`error`, `warning`, `info`) or of an `Error:` prefix.
pub fn severity(word: &str) -> Style {
    match word {
        "error" | "Error" | "FAIL" => AnsiColor::Red.on_default().bold(),
        "warning" | "Warning" => AnsiColor::Yellow.on_default().bold(),
        "ok" | "PASS" => AnsiColor::Green.on_default().bold(),
        _ => AnsiColor::Cyan.on_default().bold(),
    }
}

/// `text` in `style` when `on`, else as is.
pub fn paint(text: &str, style: Style, on: bool) -> String {
    if on {
        format!("{style}{text}{style:#}")
    } else {
        text.to_string()
    }
}
