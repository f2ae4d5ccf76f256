//! Where criterion writes its results, and where the benches that report
//! more than criterion's times (sinks, delivery, retention, export) write
//! theirs for `scripts/bench-report.py`: `$CARGO_TARGET_DIR/criterion`.

/// `$CARGO_TARGET_DIR/criterion`, or `target/criterion`.
pub fn criterion_dir() -> std::path::PathBuf {
    let dir = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| "target".into(), std::path::PathBuf::from);
    dir.join("criterion")
}
