//! What the viewer's tests share: synthetic dumps on disk.

#![allow(dead_code)]

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use minitrace_flight::{synthetic, Summary, SummaryBuilder, Writer};

/// A fresh directory for one test's files, under cargo's target/tmp.
pub fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("minitrace-view").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes `count` synthetic requests (10 spans each) to `path`; returns the
/// population's summary. Streamed: a million requests never sit in memory.
pub fn synthetic_dump(path: &Path, count: usize) -> Summary {
    let mut writer = Writer::new(BufWriter::new(File::create(path).unwrap()));
    let mut summary = SummaryBuilder::new(10);
    for request in synthetic::requests(count, 42) {
        writer.write(&request).unwrap();
        summary.add(&request);
    }
    writer.finish().unwrap();
    summary.finish()
}
