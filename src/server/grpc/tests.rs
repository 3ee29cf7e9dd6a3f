//! `proto/a2a.proto` against the A2A v1.0 specification: the service, its methods, every
//! message, field (name, type, label, number, oneof) and enum value must be the same.
//! The reference is `tests/fixtures/a2a-v1-proto-facts.txt`, the facts of the
//! specification's `a2a.proto` (v1.0.1) as this parser lists them; with `A2A_TCK_DIR` set (a
//! checkout of the 1.0 conformance kit) the kit's own copy is compared too.

use std::collections::BTreeSet;

/// The facts of a `.proto` file, one line each, sorted: `rpc`, `message`, `field`, `enum`
/// and `value` lines. Comments and options (`[...]`, `option ...;`, an rpc's `{ ... }` body)
/// are left out: they do not change the wire.
#[allow(
    clippy::too_many_lines,
    reason = "one pass of a small parser over the .proto text: each case of its loop is one construct of the grammar"
)]
pub fn facts(proto: &str) -> BTreeSet<String> {
    let text: String = proto
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    // Drop `[...]` field options.
    let mut plain = String::new();
    let mut depth = 0;
    for c in text.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            _ if depth == 0 => plain.push(c),
            _ => {}
        }
    }
    let spaced = ["{", "}", ";", "(", ")", "<", ">", ",", "="]
        .iter()
        .fold(plain, |s, p| s.replace(p, &format!(" {p} ")));
    let tokens: Vec<&str> = spaced.split_whitespace().collect();
    let mut out = BTreeSet::new();
    // (kind, name) of the open blocks; "skip" for bodies whose content is not a fact.
    let mut stack: Vec<(String, String)> = Vec::new();
    let mut i = 0;
    let at = |i: usize| tokens.get(i).copied().unwrap_or("");
    while i < tokens.len() {
        let t = tokens[i];
        let in_kind = stack.last().map(|(k, _)| k.as_str()).unwrap_or("");
        match t {
            "}" => {
                stack.pop();
                i += 1;
            }
            "{" => {
                stack.push(("skip".into(), String::new()));
                i += 1;
            }
            _ if in_kind == "skip" => i += 1,
            "syntax" | "package" | "import" | "option" => {
                if t == "package" {
                    out.insert(format!("package {}", at(i + 1)));
                }
                while i < tokens.len() && tokens[i] != ";" && tokens[i] != "{" {
                    i += 1;
                }
                if at(i) == ";" {
                    i += 1;
                }
            }
            "service" | "message" | "enum" | "oneof" => {
                let name = at(i + 1).to_string();
                let owner = stack
                    .iter()
                    .rev()
                    .find(|(k, _)| k == "message")
                    .map(|(_, n)| n.clone())
                    .unwrap_or_default();
                match t {
                    "service" | "message" | "enum" => {
                        out.insert(format!("{t} {name}"));
                    }
                    _ => {}
                }
                let entry = if t == "oneof" {
                    format!("{owner}:{name}")
                } else {
                    name
                };
                stack.push((t.to_string(), entry));
                i += 3; // name and `{`
            }
            "rpc" => {
                // rpc Name ( [stream] Req ) returns ( [stream] Resp ) ( ; | { ... } )
                let mut j = i + 1;
                let name = at(j);
                j += 2;
                let req_stream = at(j) == "stream";
                if req_stream {
                    j += 1;
                }
                let req = at(j);
                j += 4; // ) returns (
                let resp_stream = at(j) == "stream";
                if resp_stream {
                    j += 1;
                }
                let resp = at(j);
                j += 2;
                out.insert(format!(
                    "rpc {name} ({}{req}) returns ({}{resp})",
                    if req_stream { "stream " } else { "" },
                    if resp_stream { "stream " } else { "" },
                ));
                i = if at(j) == ";" { j + 1 } else { j };
            }
            _ if in_kind == "enum" => {
                // VALUE = N ;
                let name = stack.last().map(|(_, n)| n.clone()).unwrap_or_default();
                out.insert(format!("value {name}.{t} = {}", at(i + 2)));
                i += 4;
            }
            _ if in_kind == "message" || in_kind == "oneof" => {
                let (message, oneof) = match stack.last() {
                    Some((k, n)) if k == "oneof" => {
                        let (m, o) = n.split_once(':').unwrap_or((n, ""));
                        (m.to_string(), format!(" oneof {o}"))
                    }
                    Some((_, n)) => (n.clone(), String::new()),
                    None => (String::new(), String::new()),
                };
                let mut j = i;
                let label = match at(j) {
                    "repeated" | "optional" => {
                        j += 1;
                        format!("{} ", at(j - 1))
                    }
                    _ => String::new(),
                };
                let ty = if at(j) == "map" {
                    let ty = format!("map<{},{}>", at(j + 2), at(j + 4));
                    j += 6;
                    ty
                } else {
                    j += 1;
                    at(j - 1).to_string()
                };
                let field = at(j);
                let number = at(j + 2);
                out.insert(format!(
                    "field {message}.{field} = {number}: {label}{ty}{oneof}"
                ));
                i = j + 4;
            }
            _ => i += 1,
        }
    }
    out
}

fn ours() -> BTreeSet<String> {
    facts(include_str!("../../../proto/a2a.proto"))
}

fn diff(a: &BTreeSet<String>, b: &BTreeSet<String>) -> String {
    let only_a: Vec<_> = a.difference(b).collect();
    let only_b: Vec<_> = b.difference(a).collect();
    format!("only in proto/a2a.proto: {only_a:#?}\nonly in the reference: {only_b:#?}")
}

#[test]
fn the_proto_matches_the_specification_facts() {
    let reference: BTreeSet<String> =
        include_str!("../../../tests/fixtures/a2a-v1-proto-facts.txt")
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(str::to_string)
            .collect();
    let ours = ours();
    assert!(
        ours.len() > 200,
        "the parser read too little: {}",
        ours.len()
    );
    assert_eq!(ours, reference, "{}", diff(&ours, &reference));
}

#[test]
fn the_proto_matches_the_conformance_kit_copy() {
    let Ok(dir) = std::env::var("A2A_TCK_DIR") else {
        eprintln!("A2A_TCK_DIR unset: proto/a2a.proto is compared with the checked list only");
        return;
    };
    let path = std::path::Path::new(&dir).join("specification/a2a.proto");
    let kit = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "A2A_TCK_DIR is set but {} is unreadable: {e}",
            path.display()
        )
    });
    let (ours, kit) = (ours(), facts(&kit));
    assert_eq!(ours, kit, "{}", diff(&ours, &kit));
}

/// Prints the facts of the file in `A2A_PROTO` (to refresh the checked list from the
/// specification's file): `A2A_PROTO=… cargo test --lib print_proto_facts -- --ignored --nocapture`.
#[test]
#[ignore]
fn print_proto_facts() {
    let path = std::env::var("A2A_PROTO").unwrap_or_else(|_| "proto/a2a.proto".into());
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    for f in facts(&text) {
        println!("{f}");
    }
}
