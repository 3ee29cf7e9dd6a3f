//! The documentation's relative links hold: every link or image in the README, `docs/`,
//! `bench/log/` and `adapters/README.md` that names a file of the repository names one that
//! exists, and a `#fragment` names a heading of the Markdown file it points at.
//!
//! The Markdown is read with pulldown-cmark (links inside code blocks are not links). Heading
//! anchors follow GitHub's rule, which no crate in the dependency tree implements: lower-case,
//! drop everything but letters, digits, `-`, `_` and spaces, spaces become `-`, and a repeated
//! anchor gets `-1`, `-2`, ... in order.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

/// The Markdown files whose links are checked, relative to the repository root: the README,
/// `adapters/README.md`, and every `.md` under `docs/` and `bench/log/`.
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![root.join("README.md"), root.join("adapters/README.md")];
    for dir in ["docs", "bench/log"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        let mut md: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "md"))
            .collect();
        md.sort();
        files.extend(md);
    }
    files.retain(|f| f.is_file());
    files
}

/// GitHub's anchor for a heading's text (before the duplicate suffix).
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// What one Markdown file offers and asks for: its heading anchors and its link targets.
#[derive(Default)]
struct Scan {
    anchors: BTreeSet<String>,
    links: Vec<String>,
}

fn scan(text: &str) -> Scan {
    let mut out = Scan::default();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut heading: Option<String> = None;
    for event in Parser::new_ext(text, Options::ENABLE_TABLES) {
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                let base = slug(&heading.take().unwrap_or_default());
                let n = seen.entry(base.clone()).or_insert(0);
                let anchor = if *n == 0 {
                    base.clone()
                } else {
                    format!("{base}-{n}")
                };
                *n += 1;
                out.anchors.insert(anchor);
            }
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                out.links.push(dest_url.into_string())
            }
            _ => {}
        }
    }
    out
}

/// A link target that names a file of the repository (no scheme, not protocol-relative).
fn is_relative(target: &str) -> bool {
    let scheme = target
        .split_once(':')
        .is_some_and(|(s, _)| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric()));
    !scheme && !target.starts_with("//")
}

/// Every broken relative link in `files`, as `file: target: why`.
fn broken_links(root: &Path, files: &[PathBuf]) -> Vec<String> {
    let mut scans: HashMap<PathBuf, Scan> = HashMap::new();
    let mut anchors_of = |path: &Path| -> Option<BTreeSet<String>> {
        let key = path.canonicalize().ok()?;
        if !scans.contains_key(&key) {
            let text = std::fs::read_to_string(&key).ok()?;
            scans.insert(key.clone(), scan(&text));
        }
        scans.get(&key).map(|s| s.anchors.clone())
    };
    let mut problems = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file).expect("read a document");
        let name = file
            .strip_prefix(root)
            .unwrap_or(file)
            .display()
            .to_string();
        let dir = file.parent().expect("a document's folder");
        for target in scan(&text).links.iter().filter(|t| is_relative(t)) {
            let (path, fragment) = target.split_once('#').unwrap_or((target, ""));
            let resolved = if path.is_empty() {
                file.clone()
            } else {
                dir.join(path)
            };
            if !resolved.exists() {
                problems.push(format!("{name}: {target}: no such file"));
                continue;
            }
            let markdown = resolved.extension().is_some_and(|x| x == "md");
            if fragment.is_empty() || !markdown {
                continue;
            }
            let anchors = anchors_of(&resolved).unwrap_or_default();
            if !anchors.contains(fragment) {
                problems.push(format!("{name}: {target}: no heading with that anchor"));
            }
        }
    }
    problems
}

#[test]
fn every_relative_link_in_the_docs_names_a_file_and_heading_that_exist() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = documents(root);
    assert!(
        files.len() > 10,
        "the README, adapters/README.md and docs/ were not found: {files:?}"
    );
    let problems = broken_links(root, &files);
    assert!(
        problems.is_empty(),
        "broken links:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_check_reports_a_missing_file_and_a_missing_heading() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    std::fs::create_dir(root.join("docs")).expect("mkdir");
    std::fs::write(
        root.join("docs/a.md"),
        "# A\n\n## The `x` part: one\n\n## Dup\n\n## Dup\n",
    )
    .expect("write");
    let readme = "[ok](docs/a.md#the-x-part-one) [ok](docs/a.md#dup-1) [ok](#here) \
        [ok](https://example.com/#nowhere) [ok](docs/)\n\n## Here\n\n\
        [gone](docs/b.md) [bad anchor](docs/a.md#dup-2) [bad](#there)\n\n\
        ```\n[in code](docs/c.md)\n```\n";
    std::fs::write(root.join("README.md"), readme).expect("write");
    let problems = broken_links(root, &documents(root));
    assert_eq!(
        problems,
        [
            "README.md: docs/b.md: no such file",
            "README.md: docs/a.md#dup-2: no heading with that anchor",
            "README.md: #there: no heading with that anchor",
        ],
        "{problems:?}"
    );
}
