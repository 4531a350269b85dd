//! `zarrstream`: command-line tools for zarrstream stores.

fn main() {}
