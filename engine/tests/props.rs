//! Property tests: the parsers never panic on arbitrary input, and what they accept round-trips.

use nvcre_engine::{Expr, FieldPath, RuleSet, Source, Template, parse_documents};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn yaml_parser_never_panics(text in "\\PC{0,200}") {
        let _ = parse_documents(&Source::new("fuzz.yaml", text));
    }

    #[test]
    fn yaml_parser_never_panics_on_yaml_like_text(
        lines in proptest::collection::vec("( {0,4})([a-z&*!|>\\-?:\\[\\]{},#'\"]{0,3})([a-z0-9 ]{0,6})(:? ?)([a-z0-9\"'\\[\\]{}&*]{0,6})", 0..12)
    ) {
        let _ = parse_documents(&Source::new("fuzz.yaml", lines.join("\n")));
    }

    #[test]
    fn rule_loader_never_panics(text in "\\PC{0,300}") {
        let _ = RuleSet::from_sources(&[Source::new("fuzz.yaml", text)]);
    }

    #[test]
    fn cel_compiler_never_panics(text in "\\PC{0,80}") {
        let _ = Expr::compile(&text);
    }

    #[test]
    fn templates_never_panic(text in "\\PC{0,40}") {
        let _ = Template::compile(&serde_json::json!({"k": text.clone(), text.clone(): [text]}));
    }

    #[test]
    fn field_paths_round_trip(segments in proptest::collection::vec(
        prop_oneof!["[a-zA-Z][a-zA-Z0-9_-]{0,8}", "[a-z.]{1,5}/[a-z]{1,5}", "[0-9]{1,3}"], 1..6)) {
        let mut p = FieldPath::root();
        for s in &segments {
            p = match s.parse::<usize>() {
                Ok(i) if !p.segments().is_empty() => p.index(i),
                _ => p.key(s.clone()),
            };
        }
        let text = p.to_string();
        prop_assert_eq!(FieldPath::parse(&text).expect("own output parses"), p);
    }

    #[test]
    fn field_path_parser_never_panics(text in "\\PC{0,60}") {
        let _ = FieldPath::parse(&text);
    }
}
