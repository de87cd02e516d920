//! The README's pasted console sessions are what the binary prints now: every `$ dynsim …` line
//! of a ```console block is run, and its output compared (stdout, or stderr when it fails).
//! Examples whose output is elided (`...`) or that read files not in the repository are skipped.

use crate::common::dynsim;

#[test]
fn readme_console_examples_are_current() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let mut checked = 0;
    for block in readme.split("```console\n").skip(1) {
        let block = block.split("```").next().unwrap();
        let mut examples: Vec<(String, String)> = Vec::new();
        for line in block.lines() {
            match line.strip_prefix("$ dynsim ") {
                Some(cmd) => examples.push((cmd.to_string(), String::new())),
                None => {
                    let (_, out) = examples.last_mut().expect("output follows a command");
                    out.push_str(line);
                    out.push('\n');
                }
            }
        }
        for (cmd, expected) in examples {
            let args: Vec<&str> = cmd.split_whitespace().collect();
            let missing_file = args.iter().any(|a| {
                (a.ends_with(".jsonl") || a.ends_with(".toml") || a.ends_with(".csv"))
                    && !std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                        .join(a)
                        .exists()
            });
            if expected.contains("...") || missing_file {
                continue;
            }
            let out = dynsim().args(&args).output().unwrap();
            let actual = if out.status.success() {
                out.stdout
            } else {
                out.stderr
            };
            assert_eq!(String::from_utf8(actual).unwrap(), expected, "dynsim {cmd}");
            checked += 1;
        }
    }
    assert!(checked >= 8, "only {checked} README examples checked");
}
