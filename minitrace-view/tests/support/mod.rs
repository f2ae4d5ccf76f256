//! What the viewer's tests share: synthetic dumps on disk, and the
//! headless browser that looks at pages.

#![allow(dead_code)]

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use minitrace_flight::{synthetic, Writer};
use minitrace_view::{Summary, SummaryBuilder};

/// A fresh directory for one test's files, under cargo's target/tmp.
pub fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("minitrace-view").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes `count` synthetic requests (a root and 10 spans each) to `path`;
/// returns the population's summary. Streamed: a million traces never sit
/// in memory.
pub fn synthetic_dump(path: &Path, count: usize) -> Summary {
    let mut writer = Writer::new(BufWriter::new(File::create(path).unwrap()));
    let mut summary = SummaryBuilder::new(10);
    for trace in synthetic::traces(count, 42) {
        writer.write(&trace).unwrap();
        summary.add(&trace);
    }
    writer.finish().unwrap();
    summary.finish()
}

/// The workspace's root: the package's directory or the nearest above it
/// that has `scripts/browser.sh` (the root package includes this module
/// too).
pub fn workspace() -> PathBuf {
    let package = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = package.ancestors().find(|dir| dir.join("scripts/browser.sh").is_file());
    root.unwrap_or(package).to_path_buf()
}

/// Whether the browser and its driver are installed (by the set-up step,
/// `bash scripts/setup.sh`: a test never installs).
pub fn browser_ready() -> bool {
    let status =
        Command::new("bash").arg("scripts/browser.sh").arg("ready").current_dir(workspace()).status();
    match status {
        Ok(status) if status.success() => true,
        outcome => {
            let why = format!("scripts/browser.sh ready failed ({outcome:?}): run bash scripts/setup.sh");
            assert!(std::env::var("CI").as_deref() != Ok("true"), "CI=true needs the browser: {why}");
            eprintln!("SKIPPED: no headless browser: {why}");
            false
        }
    }
}

/// Runs the browser check on `page`; its JSON results.
pub fn check(page: &Path, artifacts: &Path) -> Value {
    browser(&["check".as_ref(), page.as_os_str(), artifacts.as_os_str()])
}

/// Brushes the heatmap of `page` over every latency above `min_us` (µs)
/// with scripts/browser/explain.mjs; its JSON results.
pub fn explain(page: &Path, artifacts: &Path, min_us: f64) -> Value {
    let min_us = min_us.to_string();
    browser(&["explain".as_ref(), page.as_os_str(), artifacts.as_os_str(), min_us.as_ref()])
}

/// Runs `scripts/browser.sh ARGS`; the JSON line it ends with.
fn browser(args: &[&std::ffi::OsStr]) -> Value {
    let output =
        Command::new("bash").arg("scripts/browser.sh").args(args).current_dir(workspace()).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "browser check failed: {}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|error| panic!("{error}: {stdout}"))
}

/// Screenshots go where CI keeps artifacts: target/browser-artifacts/NAME.
pub fn artifacts(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().unwrap().join("browser-artifacts").join(name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The content of `<script>` element `id` of a page, as written.
#[allow(dead_code)] // not every test binary reads a page's elements
pub fn page_script<'a>(html: &'a [u8], id: &str) -> &'a [u8] {
    let open = format!("id=\"{id}\">");
    let at = html.windows(open.len()).position(|w| w == open.as_bytes()).unwrap() + open.len();
    &html[at..at + html[at..].windows(9).position(|w| w == b"</script>").unwrap()]
}

/// The bytes of data element `id` of a page (windows-1252 text, see
/// page.rs's `data_element`), its escapes undone.
#[allow(dead_code)] // not every test binary reads a page's elements
pub fn page_element(html: &[u8], id: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut bytes = page_script(html, id).iter();
    while let Some(&byte) = bytes.next() {
        out.push(if byte == b'=' { bytes.next().unwrap() ^ 0x40 } else { byte });
    }
    out
}
