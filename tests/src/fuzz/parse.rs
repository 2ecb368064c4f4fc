//! `parse_workloadrun`: arbitrary bytes as a YAML stream.

use nvcre_engine::{
    ChunkReader, Document, Source, parse_chunk, parse_documents, parse_documents_lenient,
};

/// Reads `data` the three ways the tools read YAML: piece by piece as `check` streams an
/// input ([`ChunkReader`] + [`parse_chunk`], with the report's source lines around every
/// piece), whole as `render` reads a file ([`parse_documents`]) and leniently as the suites
/// do ([`parse_documents_lenient`]); every document is then read as a WorkloadRun with strict
/// field validation ([`nvcre_domain::read_workload_run`]), its spans looked up and written
/// back as YAML.
///
/// # Panics
/// On a panic underneath; when a stream that parses whole reads otherwise piece by piece
/// ([`super::same_documents`]); when a document written as YAML reads back as another value
/// ([`super::yaml_round_trip`]).
pub fn parse_workloadrun(data: &[u8]) {
    // `check` reads bytes: text that is not UTF-8 is a read error of the stream.
    let streamed = Source::new("in.yaml", String::new());
    let mut next = 0usize;
    for chunk in ChunkReader::new(data) {
        let Ok(chunk) = chunk else { break };
        let lines = chunk.text.split_inclusive('\n').count();
        for l in chunk.first_line.saturating_sub(1)..=chunk.first_line + lines + 1 {
            let _ = chunk.line(l);
        }
        match parse_chunk(&streamed, &chunk, next) {
            Ok(docs) => {
                next += docs.len();
                docs.iter().for_each(read);
            }
            Err(e) => {
                next += 1;
                let _ = e.to_string();
                let _ = e.location();
            }
        }
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let source = Source::new("in.yaml", text);
    let whole = parse_documents(&source);
    let (lenient, errors) = parse_documents_lenient(&source);
    for e in &errors {
        let _ = e.to_string();
    }
    lenient.iter().for_each(read);
    match whole {
        Ok(docs) => {
            docs.iter().for_each(read);
            super::same_documents(&docs, &lenient, &errors, text);
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
}

/// Reads `doc` as a WorkloadRun, looks up every span and writes it back as YAML.
fn read(doc: &Document) {
    match nvcre_domain::read_workload_run(doc) {
        Ok((run, _notes)) => {
            let _ = serde_json::to_value(&run);
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
    super::visit_spans(doc);
    super::yaml_round_trip(&doc.value);
}
