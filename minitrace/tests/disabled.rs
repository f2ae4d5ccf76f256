//! Without the `enable` feature, tracing compiles to nothing: a fn full of
//! tracing calls compiles to the same machine code as the same fn without
//! them. Checked by building a small crate against this one in release mode
//! and comparing the two functions' assembly.

use std::path::Path;
use std::process::Command;

const LIB: &str = r#"
use minitrace::local::{LocalCollector, LocalSpan};
use minitrace::prelude::*;

#[no_mangle]
pub extern "C" fn traced(x: u64) -> u64 {
    let root = Span::root("root", SpanContext::random()).with_property(|| ("x", x.to_string()));
    let _guard = root.set_local_parent();
    let _span = LocalSpan::enter_with_local_parent("child").with_property(|| ("k", "v"));
    let child = Span::enter_with_local_parent("thread-safe child");
    Event::add_to_parent("event", &child, || [("k".into(), "v".into())]);
    let collector = LocalCollector::start();
    drop(LocalSpan::enter_with_local_parent("collected"));
    root.push_child_spans(collector.collect());
    x.wrapping_mul(3)
}

#[no_mangle]
pub extern "C" fn untraced(x: u64) -> u64 {
    x.wrapping_mul(3)
}

// The no-reporter bench's workload (`wide` of `traced_workloads!` in the
// suite's src/lib.rs) and its "untraced" row, spelled the same way.
#[no_mangle]
pub extern "C" fn traced_wide(children: usize) {
    let root = Span::root("root", SpanContext::random());
    let _guard = root.set_local_parent();
    for _ in 0..children {
        let _span = LocalSpan::enter_with_local_parent("child");
    }
}

#[no_mangle]
pub extern "C" fn untraced_wide(children: usize) {
    for _ in 0..children {}
}

#[minitrace::trace(properties = { "x": "{x}" })]
#[no_mangle]
pub extern "C" fn traced_by_macro(x: u64) -> u64 {
    x.wrapping_mul(3)
}

// Spans and guards are zero-sized: a future traced with `in_span` is no
// larger than the future itself.
const _: () = assert!(std::mem::size_of::<Span>() == 0);
const _: () = assert!(std::mem::size_of::<LocalSpan>() == 0);
const _: () = assert!(std::mem::size_of::<minitrace::local::LocalParentGuard>() == 0);
const _: () = assert!(
    std::mem::size_of::<minitrace::future::InSpan<std::future::Ready<u64>>>()
        == std::mem::size_of::<std::future::Ready<u64>>()
);
"#;

/// The instructions of `name` in an assembly listing. Identical functions
/// may be merged, the second emitted as `untraced = traced`.
fn body<'a>(asm: &'a str, name: &str) -> Vec<&'a str> {
    let alias = format!("{name} = ");
    if let Some(target) = asm.lines().find_map(|line| line.trim().strip_prefix(alias.as_str())) {
        return body(asm, target.trim());
    }
    let start =
        asm.lines().position(|line| line.trim_end() == format!("{name}:")).expect("function in listing");
    asm.lines()
        .skip(start + 1)
        .map(str::trim)
        .take_while(|line| !line.starts_with(".Lfunc_end"))
        .filter(|line| !line.is_empty() && !line.starts_with('.') && !line.starts_with('#'))
        .collect()
}

#[test]
fn tracing_without_enable_compiles_to_nothing() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("minitrace-disabled");
    std::fs::create_dir_all(dir.join("src")).unwrap();
    let manifest = format!(
        "[package]\nname = \"disabled\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\
         [lib]\ncrate-type = [\"rlib\"]\n\
         [dependencies]\nminitrace = {{ path = {:?} }}\n[workspace]\n",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::write(dir.join("Cargo.toml"), manifest).unwrap();
    std::fs::write(dir.join("src/lib.rs"), LIB).unwrap();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args(["rustc", "--release", "--lib", "--quiet", "--", "--emit", "asm", "-C", "debuginfo=0"])
        .current_dir(&dir)
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .output()
        .expect("run cargo");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));

    let deps = dir.join("target/release/deps");
    let listing = std::fs::read_dir(&deps)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| {
            path.extension().is_some_and(|ext| ext == "s") && path.to_string_lossy().contains("disabled")
        })
        .expect("assembly listing");
    let asm = std::fs::read_to_string(listing).unwrap();
    let untraced = body(&asm, "untraced");
    assert!(!untraced.is_empty());
    for traced in ["traced", "traced_by_macro"] {
        assert_eq!(body(&asm, traced), untraced, "with `enable` off, `{traced}` must compile to `untraced`");
    }
    let untraced_wide = body(&asm, "untraced_wide");
    assert!(!untraced_wide.is_empty());
    assert_eq!(
        body(&asm, "traced_wide"),
        untraced_wide,
        "with `enable` off, `traced_wide` must compile to `untraced_wide`"
    );
}
