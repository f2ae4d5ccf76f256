// `mut` arguments and pattern arguments, in sync and async fns; properties
// may name the bindings.
use minitrace::prelude::*;

struct Point {
    x: i32,
    y: i32,
}

#[trace(properties = { "n": "{n}" })]
fn count_down(mut n: u32) -> u32 {
    while n > 0 {
        n -= 1;
    }
    n
}

#[trace(properties = { "a": "{a}", "b": "{b}" })]
fn add_pair((a, b): (u32, u32), _: ()) -> u32 {
    a + b
}

#[trace(properties = { "x": "{x}" })]
fn norm(Point { x, y }: Point) -> i32 {
    x.abs() + y.abs()
}

#[trace(properties = { "n": "{n}" })]
async fn count_down_async(mut n: u32) -> u32 {
    while n > 0 {
        n -= 1;
    }
    n
}

#[trace(properties = { "a": "{a}" })]
async fn add_pair_async((a, b): (u32, u32), mut c: u32) -> u32 {
    c += a + b;
    c
}

#[trace]
async fn norm_async(Point { x, y }: Point) -> i32 {
    x.abs() + y.abs()
}

#[trace]
fn push(values: &mut Vec<u32>, mut value: u32) {
    value += 1;
    values.push(value);
}

fn main() {
    assert_eq!(count_down(3), 0);
    assert_eq!(add_pair((1, 2), ()), 3);
    assert_eq!(norm(Point { x: -1, y: 2 }), 3);
    assert_eq!(futures::executor::block_on(count_down_async(3)), 0);
    assert_eq!(futures::executor::block_on(add_pair_async((1, 2), 3)), 6);
    assert_eq!(futures::executor::block_on(norm_async(Point { x: 1, y: -2 })), 3);
    let mut values = Vec::new();
    push(&mut values, 1);
    assert_eq!(values, [2]);
}
