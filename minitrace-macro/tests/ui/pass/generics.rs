// `#[trace]` on generic fns: type, lifetime and const parameters, where
// clauses, `impl Trait` arguments, generic impls.
use std::fmt::Debug;

use minitrace::prelude::*;

#[trace]
fn first<'a, T: Clone>(values: &'a [T]) -> Option<T> {
    values.first().cloned()
}

#[trace(properties = { "value": "{value:?}" })]
fn debug<T>(value: T) -> String
where
    T: Debug,
{
    format!("{value:?}")
}

#[trace]
fn sum<const N: usize>(values: [u32; N]) -> u32 {
    values.iter().sum()
}

#[trace]
fn length(value: impl AsRef<str>) -> usize {
    value.as_ref().len()
}

#[trace]
async fn longest<'a>(a: &'a str, b: &'a str) -> &'a str {
    if a.len() >= b.len() {
        a
    } else {
        b
    }
}

#[trace]
async fn clone_all<T: Clone + Send>(values: &[T]) -> Vec<T> {
    values.to_vec()
}

struct Wrapper<T>(T);

impl<T: Copy + Debug> Wrapper<T> {
    #[trace(properties = { "other": "{other:?}" })]
    fn pair<U: Debug>(&self, other: U) -> (T, U) {
        (self.0, other)
    }
}

fn main() {
    assert_eq!(first(&[1, 2]), Some(1));
    assert_eq!(debug("a"), "\"a\"");
    assert_eq!(sum([1, 2, 3]), 6);
    assert_eq!(length("abc"), 3);
    assert_eq!(futures::executor::block_on(longest("a", "bc")), "bc");
    assert_eq!(futures::executor::block_on(clone_all(&[1, 2])), vec![1, 2]);
    assert_eq!(Wrapper(1).pair("x"), (1, "x"));
}
