//! The promise table (docs/promises.md) against the docs and the tests: every promise the
//! README and docs/ make has an id where it is stated, a row in the table, and tests that exist
//! and name it. Reads files only; starts nothing.
// Test code: an unwrap that fails is a failed run, which is what it should be.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// How far above a test's `fn` line its `// promise:` comment may stand (doc comments and
/// attributes come between).
const ANNOTATION_REACH: usize = 4;

/// One row of the table.
#[derive(Debug)]
struct Row {
    id: String,
    stated_in: Vec<String>,
    tests: Vec<(String, String)>,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// The text between each pair of backticks on `line`.
fn quoted(line: &str) -> Vec<&str> {
    line.split('`').skip(1).step_by(2).collect()
}

/// The table's rows.
fn rows() -> Vec<Row> {
    let table = read(&root().join("docs/promises.md"));
    table
        .lines()
        .filter(|line| line.starts_with("| `"))
        .map(|line| {
            let cells: Vec<&str> = line.trim_matches('|').split(" | ").collect();
            assert!(cells.len() >= 4, "a row of five cells: {line}");
            let id = quoted(cells[0])[0].to_owned();
            let stated_in = cells[2].split(", ").map(|f| f.trim().to_owned()).collect();
            let tests = quoted(cells[3])
                .into_iter()
                .map(|test| {
                    let (path, name) = test.rsplit_once("::").expect("path::fn");
                    (path.to_owned(), name.to_owned())
                })
                .collect();
            Row {
                id,
                stated_in,
                tests,
            }
        })
        .collect()
}

/// README.md and every file in docs/, but the table itself.
fn docs() -> Vec<(String, String)> {
    let mut files = vec!["README.md".to_owned()];
    let mut in_docs: Vec<String> = fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md") && name != "promises.md")
        .map(|name| format!("docs/{name}"))
        .collect();
    in_docs.sort();
    files.extend(in_docs);
    files
        .into_iter()
        .map(|file| {
            let text = read(&root().join(&file));
            (file, text)
        })
        .collect()
}

/// The ids `<!-- P:id -->` on `line`.
fn ids_on(line: &str) -> Vec<&str> {
    line.split("<!-- P:")
        .skip(1)
        .filter_map(|rest| rest.split_once(" -->").map(|(id, _)| id))
        .collect()
}

/// The lines of `text` outside fenced code blocks, numbered from 1.
fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            lines.push((index + 1, line));
        }
    }
    lines
}

/// Whether `line` is a section heading or lead line that speaks of what is promised (not of
/// what is not; a document's title introduces the whole file, not a list).
fn speaks_of_promises(line: &str) -> bool {
    let lower = line.to_lowercase();
    let lead = line.starts_with("##") || line.trim_end().ends_with(':');
    let negated = [" not ", " no ", "cannot"]
        .iter()
        .any(|word| format!(" {lower} ").contains(word));
    lead && lower.contains("promise") && !negated && !line.starts_with("- ")
}

#[test]
fn every_row_names_tests_that_exist_and_name_it() {
    let rows = rows();
    assert!(rows.len() >= 20, "the table was read: {} rows", rows.len());
    let mut seen = BTreeSet::new();
    for row in &rows {
        assert!(seen.insert(row.id.clone()), "{} has two rows", row.id);
        assert!(!row.tests.is_empty(), "{} names no test", row.id);
        for (path, name) in &row.tests {
            let source = read(&root().join(path));
            let lines: Vec<&str> = source.lines().collect();
            let at = lines
                .iter()
                .position(|line| {
                    line.contains(&format!("fn {name}(")) || line.contains(&format!("fn {name}<"))
                })
                .unwrap_or_else(|| panic!("{}: no test {name} in {path}", row.id));
            let named = lines[at.saturating_sub(ANNOTATION_REACH)..at]
                .iter()
                .any(|line| {
                    line.trim_start()
                        .strip_prefix("// promise:")
                        .is_some_and(|ids| ids.split(',').any(|id| id.trim() == row.id))
                });
            assert!(
                named,
                "{path}::{name} does not name {} (`// promise: {}` above it)",
                row.id, row.id
            );
        }
    }
}

#[test]
fn every_id_stands_where_its_row_says_and_every_id_stated_has_a_row() {
    let rows = rows();
    let mut stated: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (file, text) in docs() {
        for id in ids_on(&text) {
            stated
                .entry(id.to_owned())
                .or_default()
                .insert(file.clone());
        }
    }
    for row in &rows {
        for file in &row.stated_in {
            assert!(
                stated
                    .get(&row.id)
                    .is_some_and(|files| files.contains(file)),
                "{}: its row says {file} states it, but no `<!-- P:{} -->` is there",
                row.id,
                row.id
            );
        }
    }
    for (id, files) in &stated {
        let row = rows.iter().find(|row| &row.id == id);
        let row = row.unwrap_or_else(|| panic!("{id} is stated in {files:?} but has no row"));
        for file in files {
            assert!(
                row.stated_in.contains(file),
                "{id} is stated in {file}, which its row does not list"
            );
        }
    }
}

#[test]
fn every_sentence_of_a_promise_list_carries_an_id_and_every_promise_heading_has_a_list() {
    for (file, text) in docs() {
        let lines = prose(&text);
        let mut region = false;
        // The open block (a list item or a paragraph) in a region: where it starts, whether
        // an id was on it.
        let mut block: Option<(usize, bool)> = None;
        let close = |block: &mut Option<(usize, bool)>| {
            if let Some((start, false)) = block.take() {
                panic!("{file}:{start}: a promise with no id (`<!-- P:… -->`)");
            }
        };
        for (position, &(number, line)) in lines.iter().enumerate() {
            match line.trim() {
                "<!-- promises -->" => {
                    region = true;
                    continue;
                }
                "<!-- /promises -->" => {
                    close(&mut block);
                    region = false;
                    continue;
                }
                _ => {}
            }
            if speaks_of_promises(line) {
                let next = lines[position + 1..]
                    .iter()
                    .map(|(_, line)| line.trim())
                    .find(|line| !line.is_empty());
                assert_eq!(
                    next,
                    Some("<!-- promises -->"),
                    "{file}:{number}: \"{line}\" speaks of promises; a promise list must follow"
                );
            }
            if !region {
                continue;
            }
            if line.trim().is_empty() || line.starts_with("- ") {
                close(&mut block);
            }
            if !line.trim().is_empty() {
                let has_id = !ids_on(line).is_empty();
                match &mut block {
                    Some((_, seen)) => *seen |= has_id,
                    None => block = Some((number, has_id)),
                }
            }
        }
        assert!(!region, "{file}: a promise list is not closed");
    }
}
