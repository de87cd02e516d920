//! The crate's structure: no import cycles between its top-level modules.
//!
//! Reads `src/` as text: a top-level module (`src/X.rs` or `src/X/`) depends on `Y` when its code
//! names `crate::Y` (comments and doc links do not count). The graph must be acyclic, so a
//! cycle cannot come back silently.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The top-level modules `src/lib.rs` declares.
fn top_level_modules(src: &Path) -> Vec<String> {
    let lib = fs::read_to_string(src.join("lib.rs")).expect("src/lib.rs");
    lib.lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .map(|m| m.trim_end_matches(';').trim().to_string())
        .collect()
}

/// Every `.rs` file of module `m`: `src/m.rs` and everything under `src/m/`.
fn files_of(src: &Path, m: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let file = src.join(format!("{m}.rs"));
    if file.is_file() {
        out.push(file);
    }
    let mut dirs = vec![src.join(m)];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for e in entries {
            let path = e.expect("readable directory").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|x| x == "rs") {
                out.push(path);
            }
        }
    }
    out
}

fn ident(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The first path segments after each `crate::` in `code`, including each item of a
/// `crate::{a, b::c}` group.
fn crate_refs(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = code[at + "crate::".len()..].trim_start();
        let Some(group) = rest.strip_prefix('{') else {
            out.insert(ident(rest).to_string());
            continue;
        };
        let (mut depth, mut start) = (0usize, true);
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                ',' if depth == 0 => start = true,
                c if c.is_whitespace() => {}
                _ if start => {
                    out.insert(ident(&group[i..]).to_string());
                    start = false;
                }
                _ => {}
            }
        }
    }
    out
}

/// The code of a file without its comments (line comments, doc comments).
fn code_of(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A cycle in `graph`, as the path that closes it, if there is one.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        m: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        done: &mut BTreeSet<String>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == m) {
            let mut cycle = path[i..].to_vec();
            cycle.push(m.to_string());
            return Some(cycle);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.to_string());
        for next in &graph[m] {
            if let Some(c) = visit(next, graph, done, path) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(m.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|m| visit(m, graph, &mut done, &mut Vec::new()))
}

#[test]
fn top_level_modules_import_each_other_without_cycles() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let modules = top_level_modules(&src);
    assert!(modules.len() > 10, "read the modules of src/lib.rs");
    let known: BTreeSet<&str> = modules.iter().map(String::as_str).collect();
    let mut graph = BTreeMap::new();
    for m in &modules {
        let files = files_of(&src, m);
        assert!(!files.is_empty(), "no file for module {m}");
        let deps: BTreeSet<String> = files
            .iter()
            .flat_map(|f| crate_refs(&code_of(&fs::read_to_string(f).expect("readable"))))
            .filter(|d| d != m && known.contains(d.as_str()))
            .collect();
        graph.insert(m.clone(), deps);
    }
    assert!(graph["run"].contains("cluster"), "the scan sees imports");
    if let Some(cycle) = find_cycle(&graph) {
        panic!("import cycle: {}", cycle.join(" -> "));
    }
}

#[test]
fn the_scan_reads_groups_and_skips_comments() {
    let code = code_of(
        "use crate::{a, b::{c, d}, e};\n// crate::f\nlet x = crate::g::h(); /// [`crate::i`]",
    );
    let refs: Vec<String> = crate_refs(&code).into_iter().collect();
    assert_eq!(refs, ["a", "b", "e", "g"]);
    let mut g = BTreeMap::new();
    g.insert("x".to_string(), BTreeSet::from(["y".to_string()]));
    g.insert("y".to_string(), BTreeSet::from(["x".to_string()]));
    assert_eq!(find_cycle(&g).unwrap(), ["x", "y", "x"]);
    g.get_mut("y").unwrap().clear();
    assert_eq!(find_cycle(&g), None);
}
