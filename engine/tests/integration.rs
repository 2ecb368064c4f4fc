//! The engine's integration tests, one binary (each test binary links the whole dependency tree).

mod cel_functions;
mod parsers;
mod props;
