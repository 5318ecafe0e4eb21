//! Regression: an index whose blocks share children (a graph, not a tree) once made a scan or
//! a verify walk every path — 4^14 of them in the fuzzer's 5 KB file. SPEC.md §5's layout rule
//! (children lie before their parent, at increasing offsets along each level) now stops both.

use cellar_format::{verify, ErrorKind, HFileReader};

fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/../fuzz/regressions/hfile_open_scan/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn shared_index_children_are_corruption_not_an_exponential_walk() {
    let bytes = fixture("index_dag_levels16_fanout4");
    let r = HFileReader::open(bytes.clone(), "dag").unwrap();
    let mut it = r.iter();
    let mut err = None;
    let mut steps = 0u64;
    match it.seek_to_first() {
        Err(e) => err = Some(e),
        Ok(()) => {
            while it.valid() {
                steps += 1;
                if let Err(e) = it.next() {
                    err = Some(e);
                    break;
                }
            }
        }
    }
    let e = err.expect("the damaged index must be reported");
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
    assert!(steps < 10_000, "scan walked {steps} cells");
    let report = verify(&bytes, "dag").unwrap();
    assert!(!report.is_clean());
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.what.contains("not before its parent")),
        "{:?}",
        report.problems
    );
}

#[test]
fn trailer_handle_length_overflow_is_corruption() {
    let e = HFileReader::open(fixture("trailer_handle_len_overflow"), "t").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
}
