//! The module layering that the `# Layout` doc of `src/lib.rs` states, checked against the
//! code, so that the next dependency cycle fails the tests instead of growing unnoticed:
//!
//! - each top-level module names (`crate::...`, `super::...`, `use` trees included) only
//!   modules of lower layers than its own, the layers being the numbered list of that doc;
//! - below the top, no two modules of one parent name each other, directly or round a longer
//!   cycle (a module naming its parent's own items is fine).
//!
//! Test code (`#[cfg(test)]` items and files) is left out: a test may reach anywhere.
//! Comments and string literals are left out too. The reading is textual (no compiler): a
//! path written through a `use` alias or a macro is seen where it is written.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;

/// A module's path below the crate root (`["server", "card"]`; the root is `[]`).
type ModPath = Vec<String>;

/// One path a module names: the file it is written in, the module, and the path it names.
struct Use {
    file: PathBuf,
    from: ModPath,
    to: ModPath,
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// `a/b.rs` and `a/b/mod.rs` are `["a", "b"]`; `lib.rs` and `main.rs` the root.
fn module_of(rel: &Path) -> ModPath {
    let mut parts: Vec<String> = rel
        .with_extension("")
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The source without comments, string and character literals (each literal becomes `""`),
/// so that paths written in them do not count.
fn strip(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let ident = |k: usize| k > 0 && (c[k - 1].is_alphanumeric() || c[k - 1] == '_');
    while i < c.len() {
        let rest = |k: usize, s: &str| s.chars().enumerate().all(|(n, x)| c.get(k + n) == Some(&x));
        if rest(i, "//") {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if rest(i, "/*") {
            let mut depth = 0;
            while i < c.len() {
                if rest(i, "/*") {
                    depth += 1;
                    i += 2;
                } else if rest(i, "*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if (c[i] == 'r' || rest(i, "br")) && !ident(i) && raw_start(&c, i).is_some() {
            let (hashes, body) = raw_start(&c, i).unwrap_or((0, i));
            let close = format!("\"{}", "#".repeat(hashes));
            i = body;
            while i < c.len() && !rest(i, &close) {
                i += 1;
            }
            i += close.chars().count();
            out.push_str("\"\"");
        } else if c[i] == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c[i] == '\'' && c.get(i + 1) == Some(&'\\') {
            // `'\''`, `'\n'`, `'\u{..}'`: the escaped character, then up to the quote.
            i += 3;
            while i < c.len() && c[i] != '\'' {
                i += 1;
            }
            i += 1;
            out.push_str("''");
        } else if c[i] == '\'' && c.get(i + 2) == Some(&'\'') {
            i += 3;
            out.push_str("''");
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// At a raw string literal's `r` (or `br`): the number of `#`s and where its text starts.
fn raw_start(c: &[char], i: usize) -> Option<(usize, usize)> {
    let mut k = if c[i] == 'b' { i + 2 } else { i + 1 };
    let mut hashes = 0;
    while c.get(k) == Some(&'#') {
        hashes += 1;
        k += 1;
    }
    (c.get(k) == Some(&'"')).then_some((hashes, k + 1))
}

/// The index after the block that opens at `open` (a `{`).
fn block_end(s: &[u8], open: usize) -> usize {
    let mut depth = 0;
    for (k, b) in s.iter().enumerate().skip(open) {
        match b {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return k + 1;
                }
            }
            _ => {}
        }
    }
    s.len()
}

const CFG_TEST: &str = "#[cfg(test)]";

/// `src` (stripped) without its `#[cfg(test)]` items: each from the attribute to the end of
/// its block, or to its `;` when that comes first (`mod tests;`).
fn drop_test_items(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::new();
    let mut pos = 0;
    while let Some(at) = src[pos..].find(CFG_TEST).map(|k| pos + k) {
        out.push_str(&src[pos..at]);
        let after = at + CFG_TEST.len();
        let semi = src[after..].find(';').map(|k| after + k);
        let open = src[after..].find('{').map(|k| after + k);
        pos = match (open, semi) {
            (Some(o), Some(s)) if s < o => s + 1,
            (Some(o), _) => block_end(b, o),
            (None, Some(s)) => s + 1,
            (None, None) => src.len(),
        };
    }
    out.push_str(&src[pos..]);
    out
}

/// The files that only tests compile: `#[cfg(test)] mod name;` in `file` (with its
/// `#[path = "..."]`, which is relative to `file`'s folder).
fn test_files(file: &Path, source: &str) -> Vec<PathBuf> {
    static RE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r#"#\[cfg\(test\)\]\s*(?:#\[path\s*=\s*"([^"]+)"\]\s*)?(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;"#,
        )
        .unwrap()
    });
    let dir = match file.file_stem().and_then(|s| s.to_str()) {
        Some("mod" | "lib" | "main") => file.parent().unwrap().to_path_buf(),
        _ => file.with_extension(""),
    };
    RE.captures_iter(source)
        .flat_map(|m| match m.get(1) {
            Some(path) => vec![file.parent().unwrap().join(path.as_str())],
            None => vec![dir.join(format!("{}.rs", &m[2])), dir.join(&m[2])],
        })
        .collect()
}

/// The module paths that `code` (of module `module`) names through `crate::`, `super::` and
/// `self::`, with each item of a `use` tree (`crate::{a, b::c}`) on its own.
fn named_paths(module: &[String], code: &str) -> Vec<ModPath> {
    static RE: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"\b(crate|super|self)((?:::\w+)*)(::\{)?").unwrap());
    let mut out = Vec::new();
    for m in RE.captures_iter(code) {
        let mut rest: Vec<String> = m[2]
            .split("::")
            .filter(|p| !p.is_empty())
            .map(String::from)
            .collect();
        let mut base: ModPath = match &m[1] {
            "crate" => Vec::new(),
            "super" => module[..module.len().saturating_sub(1)].to_vec(),
            _ => module.to_vec(),
        };
        while rest.first().is_some_and(|p| p == "super") {
            base.pop();
            rest.remove(0);
        }
        base.extend(rest);
        let Some(open) = m.get(3) else {
            out.push(base);
            continue;
        };
        let end = block_end(code.as_bytes(), open.end() - 1);
        for item in top_level_items(&code[open.end()..end - 1]) {
            let first: Vec<String> = item
                .split(|ch: char| !(ch.is_alphanumeric() || ch == '_' || ch == ':'))
                .next()
                .unwrap_or_default()
                .split("::")
                .filter(|p| !p.is_empty())
                .map(String::from)
                .collect();
            let mut path = base.clone();
            path.extend(first);
            out.push(path);
        }
    }
    out
}

/// The comma-separated items of a `use` tree's braces, nested braces kept whole.
fn top_level_items(inner: &str) -> Vec<String> {
    let mut items = vec![String::new()];
    let mut depth = 0;
    for ch in inner.chars() {
        match ch {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(String::new());
                continue;
            }
            _ => {}
        }
        if let Some(last) = items.last_mut() {
            last.push(ch);
        }
    }
    items
        .into_iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Every module of `src/` (by its files) and every path its non-test code names.
fn scan(src: &Path) -> (BTreeSet<ModPath>, Vec<Use>) {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut texts = Vec::new();
    let mut test_only: Vec<PathBuf> = Vec::new();
    for f in &files {
        let source = std::fs::read_to_string(f).unwrap();
        test_only.extend(test_files(f, &source));
        texts.push((f.clone(), strip(&source)));
    }
    let mut modules = BTreeSet::new();
    let mut uses = Vec::new();
    for (f, text) in texts {
        if test_only.iter().any(|t| f == *t || f.starts_with(t)) || f.ends_with("main.rs") {
            continue;
        }
        let module = module_of(f.strip_prefix(src).unwrap());
        for to in named_paths(&module, &drop_test_items(&text)) {
            uses.push(Use {
                file: f.strip_prefix(src).unwrap().to_path_buf(),
                from: module.clone(),
                to,
            });
        }
        modules.insert(module);
    }
    (modules, uses)
}

/// The layers of the `# Layout` doc of `lib.rs`, lowest first: its numbered lines
/// (`//! 3. [`task`], [`policy`] (pure).`), the modules named before the parenthesis.
fn layers(lib_rs: &str) -> Vec<Vec<String>> {
    let item = Regex::new(r"^//! *\d+\. (.*)$").unwrap();
    let name = Regex::new(r"\[`(\w+)`\]").unwrap();
    lib_rs
        .lines()
        .filter_map(|l| item.captures(l))
        .map(|m| {
            let head = m[1].split('(').next().unwrap_or_default().to_string();
            name.captures_iter(&head)
                .map(|n| n[1].to_string())
                .collect()
        })
        .collect()
}

/// The top-level modules that name a module of their own layer or a higher one.
fn layer_violations(layers: &[Vec<String>], uses: &[Use]) -> Vec<String> {
    let rank: BTreeMap<&str, usize> = layers
        .iter()
        .enumerate()
        .flat_map(|(i, l)| l.iter().map(move |m| (m.as_str(), i + 1)))
        .collect();
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for u in uses {
        let (Some(a), Some(b)) = (u.from.first(), u.to.first()) else {
            continue;
        };
        let (Some(ra), Some(rb)) = (rank.get(a.as_str()), rank.get(b.as_str())) else {
            continue;
        };
        if a != b && rb >= ra && seen.insert((a.clone(), b.clone())) {
            out.push(format!(
                "`{a}` (layer {ra}) uses `{b}` (layer {rb}): {} names `{}`",
                u.file.display(),
                u.to.join("::")
            ));
        }
    }
    out
}

/// Sibling modules that name each other, round a cycle: one line per cycle, with a file
/// for each step.
fn sibling_cycles(modules: &BTreeSet<ModPath>, uses: &[Use]) -> Vec<String> {
    // parent → child → child it names → an example (file, path).
    let mut graphs: BTreeMap<ModPath, BTreeMap<String, BTreeMap<String, String>>> = BTreeMap::new();
    for u in uses {
        let common = u.from.iter().zip(&u.to).take_while(|(a, b)| a == b).count();
        let (Some(a), Some(b)) = (u.from.get(common), u.to.get(common)) else {
            continue;
        };
        let parent = u.from[..common].to_vec();
        if parent.is_empty() || !modules.contains(&[parent.clone(), vec![b.clone()]].concat()) {
            continue;
        }
        graphs
            .entry(parent)
            .or_default()
            .entry(a.clone())
            .or_default()
            .entry(b.clone())
            .or_insert_with(|| format!("{} names `{}`", u.file.display(), u.to.join("::")));
    }
    let mut out = Vec::new();
    for (parent, g) in &graphs {
        for cycle in cycles(g) {
            let steps: Vec<String> = cycle
                .windows(2)
                .map(|w| format!("{} → {} ({})", w[0], w[1], g[&w[0]][&w[1]]))
                .collect();
            out.push(format!("in `{}`: {}", parent.join("::"), steps.join("; ")));
        }
    }
    out
}

/// One cycle (first node repeated at the end) per strongly connected part with a cycle.
fn cycles(g: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<Vec<String>> {
    let mut reported: BTreeSet<String> = BTreeSet::new();
    let mut out = Vec::new();
    for start in g.keys() {
        if reported.contains(start) {
            continue;
        }
        if let Some(path) = path_back(g, start) {
            reported.extend(path.iter().cloned());
            out.push(path);
        }
    }
    out
}

/// A shortest path from `start` back to itself (`[start, .., start]`), if there is one.
fn path_back(g: &BTreeMap<String, BTreeMap<String, String>>, start: &str) -> Option<Vec<String>> {
    let mut prev: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(n) = queue.pop_front() {
        for next in g.get(n).map(|m| m.keys()).into_iter().flatten() {
            if next == start {
                let mut back = vec![n];
                while let Some(&p) = prev.get(back[back.len() - 1]) {
                    back.push(p);
                }
                let mut path = vec![start.to_string()];
                path.extend(
                    back.iter()
                        .rev()
                        .filter(|x| **x != start)
                        .map(|x| x.to_string()),
                );
                path.push(start.to_string());
                return Some(path);
            }
            if next != start && !prev.contains_key(next.as_str()) {
                prev.insert(next, n);
                queue.push_back(next);
            }
        }
    }
    None
}

#[test]
fn every_top_level_module_has_a_layer() {
    let lib = std::fs::read_to_string(src_dir().join("lib.rs")).unwrap();
    let layered: BTreeSet<String> = layers(&lib).into_iter().flatten().collect();
    let code = drop_test_items(&strip(&lib));
    let re = Regex::new(r"(?m)^(?:pub(?:\([^)]*\))? )?mod (\w+);").unwrap();
    let declared: BTreeSet<String> = re.captures_iter(&code).map(|m| m[1].to_string()).collect();
    assert!(!declared.is_empty());
    assert_eq!(
        layered, declared,
        "the numbered layers of lib.rs's # Layout doc must name each top-level module once"
    );
}

#[test]
fn modules_use_only_lower_layers() {
    let src = src_dir();
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let (_, uses) = scan(&src);
    let bad = layer_violations(&layers(&lib), &uses);
    assert!(
        bad.is_empty(),
        "a module uses one of its own or a higher layer (see the # Layout doc of src/lib.rs; move the shared item to the lower module that owns it):\n  {}",
        bad.join("\n  ")
    );
}

#[test]
fn no_two_modules_of_one_parent_use_each_other() {
    let (modules, uses) = scan(&src_dir());
    let bad = sibling_cycles(&modules, &uses);
    assert!(
        bad.is_empty(),
        "modules that use each other (move the shared item to the module that owns it):\n  {}",
        bad.join("\n  ")
    );
}

#[test]
fn the_reading_sees_use_trees_and_skips_comments_strings_and_tests() {
    let code = strip(
        "use crate::{a::X, b};\n// crate::c\nlet s = \"crate::d\"; let r = r#\"crate::e\"#;\n\
         let q = '\\''; fn f<'a>(x: &'a str) { super::super::g::h(); }\n\
         #[cfg(test)]\nmod tests { use crate::t; }\n",
    );
    let got = named_paths(&["m".into(), "n".into()], &drop_test_items(&code));
    let want: Vec<ModPath> = vec![
        vec!["a".into(), "X".into()],
        vec!["b".into()],
        vec!["g".into(), "h".into()],
    ];
    assert_eq!(got, want);
}

#[test]
fn a_cycle_between_siblings_is_found() {
    let m = |s: &str| -> ModPath { s.split("::").map(String::from).collect() };
    let modules: BTreeSet<ModPath> = ["p", "p::a", "p::b", "p::c"].map(m).into();
    let u = |from: &str, to: &str| Use {
        file: PathBuf::from(format!("{}.rs", from.replace("::", "/"))),
        from: m(from),
        to: m(to),
    };
    let acyclic = [
        u("p::a", "p::b::X"),
        u("p::b", "p::c::Y"),
        u("p::c", "p::Z"),
    ];
    assert!(sibling_cycles(&modules, &acyclic).is_empty());
    let cyclic = [
        u("p::a", "p::b::X"),
        u("p::b", "p::c::Y"),
        u("p::c", "p::a::W"),
    ];
    let found = sibling_cycles(&modules, &cyclic);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("in `p`: a → b (p/a.rs names `p::b::X`)"),
        "{}",
        found[0]
    );
}
