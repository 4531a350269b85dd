//! Prints the JSON Schema of the configuration, generated from the option types
//! (`zarrstream::config::schema`): `docs/config.schema.json` is its output,
//!
//! ```text
//! cargo run -p zarrstream --example config_schema > docs/config.schema.json
//! ```
//!
//! and a test fails when the committed file differs.

fn main() {
    print!("{}", zarrstream::config::schema_text());
}
