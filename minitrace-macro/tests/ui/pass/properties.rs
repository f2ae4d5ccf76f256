// `properties`: constants, format strings naming the arguments (Display,
// Debug, format specs), escaped braces, an empty map, a trailing comma.
use minitrace::prelude::*;

#[derive(Debug)]
struct Request {
    id: u64,
}

#[trace(properties = {
    "constant": "value",
    "display": "{id}",
    "debug": "{request:?}",
    "pretty": "{request:#?}",
    "spec": "{id:>8}",
    "mixed": "id {id} of {request:?}",
    "escaped": "{{not a placeholder}}",
    "escaped and formatted": "{{{id}}}",
    "": "",
})]
fn handle(id: u64, request: &Request) -> u64 {
    id + request.id
}

#[trace(properties = {})]
fn empty() {}

fn main() {
    assert_eq!(handle(1, &Request { id: 2 }), 3);
    empty();
}
