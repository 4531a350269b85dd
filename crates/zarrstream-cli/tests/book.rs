//! The documentation: the book (`docs/book`) builds without a warning and none of its
//! links is broken; the README stays short, its links resolve and its Python example is
//! the one the Python suite runs.
//!
//! `tools/book/build` builds the book with mdBook, installing it once per machine when it
//! is missing (see `tools/README.md`). mdBook's own check misses links to missing files
//! and anchors, so this test reads every `href` and `src` of the generated HTML and
//! resolves each relative one: the file must exist inside the book, and a `#fragment` must
//! be an `id` of that file. When mdBook cannot be had (no cargo, no registry) the test
//! is skipped loudly; with `CI=true` that is a failure.
//!
//! The Rust examples of the book and the README are doctests of the library
//! (`crates/zarrstream/src/lib.rs`, `mod book`), not checked here.

// Driven from Linux (the Windows build is exercised by windows*.rs); the Windows build of
// this package leaves it out.
#![cfg(target_os = "linux")]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};

use zarrstream_testkit::python::{in_ci, shout};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Builds the book into a fresh directory and returns it, or `None` when mdBook cannot
/// be had outside CI.
fn build_book() -> Option<PathBuf> {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("book");
    let _ = std::fs::remove_dir_all(&out);
    let result = Command::new(repo().join("tools/book/build"))
        .arg("--out")
        .arg(&out)
        .stdin(Stdio::null())
        .output()
        .expect("cannot run tools/book/build");
    let stderr = String::from_utf8_lossy(&result.stderr);
    match result.status.code() {
        Some(0) => Some(out),
        Some(3) if !in_ci() => {
            shout(&format!(
                "\n{bar}\nthe book test SKIPPED: mdBook cannot be had.\n{stderr}\n\
                 (With CI=true this is a failure.)\n{bar}\n",
                bar = "!".repeat(78)
            ));
            None
        }
        _ => panic!("tools/book/build failed ({}):\n{stderr}", result.status),
    }
}

/// Every value of the attributes `href` and `src` in `html`, in order.
fn links(html: &str) -> Vec<String> {
    let mut found = Vec::new();
    for attr in ["href=\"", "src=\""] {
        let mut rest = html;
        while let Some(at) = rest.find(attr) {
            // Only a whole attribute name: `data-href="` is not a link.
            let before = rest[..at].chars().next_back();
            rest = &rest[at + attr.len()..];
            if before.is_some_and(|c| !c.is_whitespace()) {
                continue;
            }
            if let Some(end) = rest.find('"') {
                found.push(rest[..end].replace("&amp;", "&"));
            }
        }
    }
    found
}

/// Every `id="…"` in `html`.
fn ids(html: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = html;
    while let Some(at) = rest.find("id=\"") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + 4..];
        if before.is_some_and(|c| !c.is_whitespace()) {
            continue;
        }
        if let Some(end) = rest.find('"') {
            found.insert(rest[..end].to_string());
        }
    }
    found
}

/// `%XX` escapes decoded (mdBook escapes non-ASCII file names and fragments).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Some(b) = std::str::from_utf8(&bytes[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `base/link` with `.` and `..` resolved lexically, or `None` when it leaves `root`.
fn resolve(root: &Path, base: &Path, link: &str) -> Option<PathBuf> {
    let mut path = base.strip_prefix(root).ok()?.to_path_buf();
    for part in Path::new(link).components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                if !path.pop() {
                    return None;
                }
            }
            Component::Normal(p) => path.push(p),
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(root.join(path))
}

/// Whether a link leaves the document set (another site, a script, the mail program).
fn external(link: &str) -> bool {
    link.contains("://")
        || link.starts_with("mailto:")
        || link.starts_with("javascript:")
        || link.starts_with("data:")
}

/// The HTML files under `dir`, recursively.
fn html_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            html_files(&path, found);
        } else if path.extension().is_some_and(|e| e == "html") {
            found.push(path);
        }
    }
}

#[test]
fn the_book_builds_and_every_relative_link_resolves() {
    let Some(book) = build_book() else { return };
    assert!(
        book.join("index.html").is_file(),
        "no index.html in {}",
        book.display()
    );

    // Every chapter of SUMMARY.md became a page.
    let summary = std::fs::read_to_string(repo().join("docs/book/src/SUMMARY.md")).unwrap();
    let mut chapters = 0;
    for line in summary.lines() {
        if let Some(start) = line.find("](") {
            let md = &line[start + 2..line.rfind(')').unwrap()];
            let html = book.join(md.replace(".md", ".html"));
            assert!(
                html.is_file(),
                "chapter {md} has no page {}",
                html.display()
            );
            chapters += 1;
        }
    }
    assert!(chapters >= 20, "SUMMARY.md lists only {chapters} chapters");

    let mut pages = Vec::new();
    html_files(&book, &mut pages);
    // 404.html resolves its links against the site's root (`<base href="/">`).
    pages.retain(|p| p.file_name().is_some_and(|n| n != "404.html"));
    let mut id_cache: BTreeMap<PathBuf, BTreeSet<String>> = BTreeMap::new();
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in &pages {
        let html = std::fs::read_to_string(page).unwrap();
        let base = page.parent().unwrap();
        for link in links(&html) {
            if link.is_empty() || external(&link) || link.starts_with('/') {
                continue;
            }
            let (path, fragment) = match link.split_once('#') {
                Some((p, f)) => (p, Some(percent_decode(f))),
                None => (link.as_str(), None),
            };
            let path = percent_decode(path.split('?').next().unwrap());
            let target = if path.is_empty() {
                Some(page.clone())
            } else {
                resolve(&book, base, &path)
            };
            checked += 1;
            let Some(target) = target.filter(|t| t.exists()) else {
                broken.push(format!("{}: {link} (no such file)", page.display()));
                continue;
            };
            let target = if target.is_dir() {
                target.join("index.html")
            } else {
                target
            };
            if let Some(fragment) = fragment.filter(|f| !f.is_empty()) {
                let ids = id_cache
                    .entry(target.clone())
                    .or_insert_with(|| ids(&std::fs::read_to_string(&target).unwrap_or_default()));
                if !ids.contains(&fragment) {
                    broken.push(format!("{}: {link} (no id {fragment:?})", page.display()));
                }
            }
        }
    }
    assert!(
        broken.is_empty(),
        "{} broken links in the book:\n{}",
        broken.len(),
        broken.join("\n")
    );
    assert!(
        checked > 100,
        "only {checked} relative links checked: is the parser right?"
    );
}

/// The Python example of the README: the lines between the ANCHOR comments of
/// `examples/python/quickstart.py` (run by `tests/python/test_examples.py`), dedented.
#[test]
fn the_readme_shows_the_python_example_the_tests_run() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let example = std::fs::read_to_string(repo().join("examples/python/quickstart.py")).unwrap();
    let start = example
        .find("# ANCHOR: writer\n")
        .expect("no ANCHOR: writer")
        + 17;
    let end = example
        .find("    # ANCHOR_END: writer")
        .expect("no ANCHOR_END: writer");
    let body: String = example[start..end]
        .lines()
        .map(|l| l.strip_prefix("    ").unwrap_or(l))
        .map(|l| format!("{l}\n"))
        .collect();
    let block = readme
        .split("```python\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("the README has no python block");
    assert_eq!(
        block, body,
        "README's Python example differs from examples/python/quickstart.py"
    );
}

/// The README is an entry page: under 150 lines, and every relative link points at a file
/// of the repository.
#[test]
fn the_readme_is_short_and_its_links_resolve() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines < 150,
        "README.md has {lines} lines; the book is the place for more"
    );
    let mut broken = Vec::new();
    let mut rest = readme.as_str();
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        let Some(end) = rest.find(')') else { break };
        let link = &rest[..end];
        if external(link) || link.starts_with('#') {
            continue;
        }
        let path = link.split('#').next().unwrap();
        if !repo().join(path).exists() {
            broken.push(link.to_string());
        }
    }
    assert!(
        broken.is_empty(),
        "README.md links to missing files: {broken:?}"
    );
}

/// Every chapter with Rust code is a doctest of the library (`mod book` of
/// `crates/zarrstream/src/lib.rs`), so no Rust example of the book goes untested.
#[test]
fn every_rust_example_of_the_book_is_a_doctest() {
    let lib = std::fs::read_to_string(repo().join("crates/zarrstream/src/lib.rs")).unwrap();
    let mut chapters = Vec::new();
    let mut dirs = vec![repo().join("docs/book/src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                chapters.push(path);
            }
        }
    }
    let mut untested = Vec::new();
    for chapter in chapters {
        let text = std::fs::read_to_string(&chapter).unwrap();
        if !text.contains("```rust") {
            continue;
        }
        let rel = chapter
            .strip_prefix(repo())
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if !lib.contains(&format!("include_str!(\"../../../{rel}\")")) {
            untested.push(rel);
        }
    }
    assert!(
        untested.is_empty(),
        "chapters with Rust code that crates/zarrstream/src/lib.rs does not include as \
         doctests: {untested:?}"
    );
}
