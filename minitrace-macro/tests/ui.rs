//! Compile tests: every accepted form of `#[trace]` and `#[trace_async]`
//! compiles and runs (`ui/pass`), and every misuse fails with the error in
//! its `.stderr` (`ui/fail`). Regenerate the `.stderr` files with
//! `TRYBUILD=overwrite cargo test -p minitrace-macro --test ui`, then read
//! each one.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("tests/ui/pass/*.rs");
    cases.compile_fail("tests/ui/fail/*.rs");
}
