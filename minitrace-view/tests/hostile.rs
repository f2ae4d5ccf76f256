//! minitrace-view on forged dumps, the same as minitrace-flight's reader
//! meets in its tests/hostile.rs: a clear error and exit code 1, no page and
//! no temporary file left behind, and peak memory under a bound; or, for a
//! dump that is valid, its page.
//!
//! The command line runs under a 1 GiB address-space limit and its peak
//! resident memory comes from `wait4`; the library's random cases run in a
//! child process (this test binary again) that reports its own peak.

#![cfg(target_os = "linux")]

#[path = "../../minitrace-flight/tests/forge/mod.rs"]
mod forge;
mod support;

use std::ffi::OsStr;
use std::io::Read;
use std::mem::MaybeUninit;
use std::path::Path;
use std::process::{Command, Stdio};

use forge::{Expect, Rng, MIB, PEAK_RSS_BOUND};
use minitrace_flight::Reader;
use minitrace_view::{render_page, ViewError};

/// What a run of the command line gave.
#[derive(Debug)]
struct Run {
    /// The exit code; `None` if a signal ended it.
    code: Option<i32>,
    stdout: String,
    stderr: String,
    /// Its peak resident memory, in bytes.
    peak_rss: u64,
}

/// Runs `minitrace-view ARGS` under the address-space limit, and waits for
/// it with `wait4`, which gives its own peak memory (`ru_maxrss`).
// wait4 reaps the child, which std's `Child::wait` cannot see.
#[allow(clippy::zombie_processes)]
fn view(args: &[&dyn AsRef<OsStr>]) -> Run {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {} && exec \"$0\" \"$@\"", forge::ADDRESS_SPACE_LIMIT / 1024))
        .arg(env!("CARGO_BIN_EXE_minitrace-view"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            pipe.read_to_string(&mut text).unwrap();
            text
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    let mut usage = MaybeUninit::<libc::rusage>::uninit();
    loop {
        // SAFETY: `status` and `usage` are valid for writes of their types
        // for the call; `pid` is our own child, not yet waited for (std's
        // `Child` only waits when asked, and it is not asked).
        let reaped = unsafe { libc::wait4(pid, &mut status, 0, usage.as_mut_ptr()) };
        if reaped == pid {
            break;
        }
        let error = std::io::Error::last_os_error();
        assert_eq!(error.kind(), std::io::ErrorKind::Interrupted, "wait4: {error}");
    }
    // SAFETY: wait4 returned the child's pid, so it filled in `usage`.
    let usage = unsafe { usage.assume_init() };
    Run {
        code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
        // Linux counts ru_maxrss in KiB.
        peak_rss: usage.ru_maxrss as u64 * 1024,
    }
}

/// The files in `dir` other than dumps: pages, exports, temporary files.
fn outputs(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| !name.ends_with(".mtf"))
        .collect();
    names.sort();
    names
}

#[test]
fn forged_dumps_fail_the_command_line_clearly_in_bounded_memory_leaving_no_file() {
    let dir = support::scratch("hostile-forged");
    for (name, make, expect) in forge::forgeries() {
        let dump = dir.join(format!("{}.mtf", name.replace([' ', ','], "-")));
        std::fs::write(&dump, make()).unwrap();
        let page = dump.with_extension("html");
        let json = dump.with_extension("json");
        // The default (summary, then the page beside the dump), and the export.
        for (mode, run) in [("default", view(&[&dump])), ("--perfetto", view(&[&dump, &"--perfetto", &json]))]
        {
            eprintln!(
                "{name} ({mode}): exit {:?}, peak RSS {:.1} MiB: {}",
                run.code,
                run.peak_rss as f64 / MIB as f64,
                run.stderr.trim()
            );
            assert!(
                run.peak_rss < PEAK_RSS_BOUND,
                "{name} ({mode}): peak RSS {} MiB, over the bound of {} MiB",
                run.peak_rss / MIB,
                PEAK_RSS_BOUND / MIB
            );
            let failure = match expect {
                Expect::Reads(_) => None,
                Expect::Corrupt(text) => Some(text),
                Expect::Truncated => Some("truncated"),
            };
            if let Some(text) = failure {
                assert_eq!(run.code, Some(1), "{name} ({mode}): {run:?}");
                assert!(
                    run.stderr.starts_with("minitrace-view: ") && run.stderr.contains(text),
                    "{name} ({mode}): {}",
                    run.stderr
                );
                assert_eq!(outputs(&dir), Vec::<String>::new(), "{name} ({mode}): nothing is left behind");
            } else {
                assert_eq!(run.code, Some(0), "{name} ({mode}): {run:?}");
                assert!(run.stdout.contains("page: ") || run.stdout.contains("perfetto: "), "{run:?}");
            }
        }
        let _ = std::fs::remove_file(&page);
        let _ = std::fs::remove_file(&json);
    }
}

/// One random case through the library: the page is made exactly when the
/// reader reads the dump whole, and otherwise fails with the reader's error.
fn one_case(seed: u64, case: usize, seeds: &[Vec<u8>]) -> bool {
    let mut rng = Rng::new(seed ^ (case as u64).wrapping_mul(0xa076_1d64_78bd_642f));
    let bytes = forge::mutate(&mut rng, seeds);
    let (read, error) = forge::read_all(&bytes);
    let page = Reader::new(&bytes[..])
        .map_err(ViewError::Dump)
        .and_then(|reader| render_page(reader, "fuzz", std::io::sink()));
    match (page, error) {
        (Ok(stats), None) => {
            assert_eq!(stats.requests as usize, read.len());
            true
        }
        (Err(ViewError::Dump(page_error)), Some(error)) => {
            assert_eq!(page_error.to_string(), error.to_string());
            false
        }
        (page, error) => panic!("the page: {page:?}; the reader: {error:?}"),
    }
}

#[test]
fn random_mutations_of_valid_dumps_make_a_page_or_the_readers_error() {
    const TEST: &str = "random_mutations_of_valid_dumps_make_a_page_or_the_readers_error";
    let seed = forge::fuzz_seed();
    let cases = forge::fuzz_cases();
    let env = [("FLIGHT_FUZZ_SEED", seed.to_string()), ("FLIGHT_FUZZ_CASES", cases.to_string())];
    let report = forge::in_child(TEST, "mutations", &env, |_| {
        let seeds = forge::seed_dumps();
        forge::reset_peak_rss();
        let mut pages = 0;
        for case in 0..cases {
            match std::panic::catch_unwind(|| one_case(seed, case, &seeds)) {
                Ok(page) => pages += u64::from(page),
                Err(_) => panic!("case {case} failed: rerun with FLIGHT_FUZZ_SEED={seed}"),
            }
        }
        vec![format!("{pages} pages")]
    });
    let Some(report) = report else { return };
    eprintln!(
        "FLIGHT_FUZZ_SEED={seed}: {cases} cases, {}; peak RSS {:.1} MiB",
        report.lines[0],
        report.peak_rss as f64 / MIB as f64
    );
    assert!(
        report.peak_rss < PEAK_RSS_BOUND,
        "FLIGHT_FUZZ_SEED={seed}: peak RSS {} MiB, over the bound of {} MiB",
        report.peak_rss / MIB,
        PEAK_RSS_BOUND / MIB
    );
}

#[test]
fn random_mutations_through_the_command_line_exit_cleanly_and_leave_no_file() {
    const CASES: usize = 300;
    let seed = forge::fuzz_seed();
    let seeds = forge::seed_dumps();
    let dir = support::scratch("hostile-mutations");
    let dump = dir.join("mutated.mtf");
    let page = dir.join("mutated.html");
    for case in 0..CASES {
        let mut rng = Rng::new(seed ^ (case as u64).wrapping_mul(0x2545_f491_4f6c_dd1d));
        let bytes = forge::mutate(&mut rng, &seeds);
        std::fs::write(&dump, &bytes).unwrap();
        let run = view(&[&dump, &"-o", &page]);
        let context = format!("FLIGHT_FUZZ_SEED={seed}, case {case}: {run:?}");
        assert!(run.peak_rss < PEAK_RSS_BOUND, "{context}");
        match forge::read_all(&bytes).1 {
            None => {
                assert_eq!(run.code, Some(0), "{context}");
                std::fs::remove_file(&page).unwrap();
            }
            Some(error) => {
                assert_eq!(run.code, Some(1), "{context}");
                assert!(
                    run.stderr.starts_with("minitrace-view: ") && run.stderr.contains(&error.to_string()),
                    "{context}"
                );
            }
        }
        assert_eq!(outputs(&dir), Vec::<String>::new(), "{context}");
    }
}
