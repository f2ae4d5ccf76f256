//! Root names that last as long as the program, so that a request whose
//! name comes from a bounded set (an axum route, a gRPC method) names its
//! root and fills its route's properties without allocating or formatting.
//!
//! A name is made once, program-wide, and kept (leaked) in a table of at
//! most [`MAX_NAMES`]; each thread keeps the ones it used in a cache of its
//! own, so that a request reads no shared lock. Past the bound (a server
//! with more routes than that, or a client flooding a gRPC server with
//! made-up methods), names are made per request, as owned strings: the
//! same names, only slower.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Mutex;

use http::Method;

/// A root's name and what its properties borrow from it.
#[derive(Debug)]
pub(crate) struct Named {
    /// `GET /users/{id}`, or `pkg.Service/Method` for gRPC.
    pub(crate) name: &'static str,
    /// The route (`/users/{id}`); for gRPC, the path.
    pub(crate) route: &'static str,
    /// gRPC's service and method, when the path names both.
    pub(crate) grpc: Option<(&'static str, &'static str)>,
}

/// The most names the program keeps.
const MAX_NAMES: usize = 4096;

/// The standard methods, each a slot; and one for gRPC.
const SLOTS: usize = 10;
const GRPC_SLOT: usize = 9;

fn method_slot(method: &Method) -> Option<usize> {
    Some(match *method {
        Method::GET => 0,
        Method::POST => 1,
        Method::PUT => 2,
        Method::DELETE => 3,
        Method::HEAD => 4,
        Method::OPTIONS => 5,
        Method::CONNECT => 6,
        Method::PATCH => 7,
        Method::TRACE => 8,
        _ => return None,
    })
}

/// FNV-1a: routes are short, and they are not chosen by the callers (a
/// gRPC path is, but the table is bounded, not keyed by a secret seed).
#[derive(Default)]
struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut hash = if self.0 == 0 { 0xcbf2_9ce4_8422_2325 } else { self.0 };
        for &byte in bytes {
            hash = (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        self.0 = hash;
    }
}

/// Per route (or gRPC path), its names by slot.
type Table = HashMap<&'static str, [Option<&'static Named>; SLOTS], BuildHasherDefault<Fnv>>;

/// Every name made, and how many.
type Names = Mutex<(Option<Table>, usize)>;

static NAMES: Names = Mutex::new((None, 0));

thread_local! {
    /// The names this thread used.
    static CACHE: RefCell<Table> = RefCell::new(Table::default());
}

/// The name of a request of `method` to the route `route` (`GET
/// /users/{id}`), if the program keeps it.
pub(crate) fn route(method: &Method, route: &str) -> Option<&'static Named> {
    named(method_slot(method)?, route)
}

/// The name of a gRPC call of the path `path` (`pkg.Service/Method`), if
/// the program keeps it.
pub(crate) fn grpc(path: &str) -> Option<&'static Named> {
    named(GRPC_SLOT, path)
}

fn named(slot: usize, text: &str) -> Option<&'static Named> {
    CACHE
        .try_with(|cache| {
            if let Some(named) = cache.try_borrow().ok()?.get(text).and_then(|names| names[slot]) {
                return Some(named);
            }
            let named = intern(&NAMES, MAX_NAMES, slot, text)?;
            if let Ok(mut cache) = cache.try_borrow_mut() {
                cache.entry(named.route).or_default()[slot] = Some(named);
            }
            Some(named)
        })
        .ok()
        .flatten()
}

/// Finds or makes the name in `names`, which keeps at most `max`.
#[cold]
fn intern(names: &Names, max: usize, slot: usize, text: &str) -> Option<&'static Named> {
    let mut names = names.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let (table, count) = &mut *names;
    let table = table.get_or_insert_with(Table::default);
    if let Some(named) = table.get(text).and_then(|names| names[slot]) {
        return Some(named);
    }
    if *count >= max {
        return None;
    }
    *count += 1;
    // The route is kept once for all its methods.
    let route: &'static str = match table.get_key_value(text) {
        Some((route, _)) => route,
        None => Box::leak(text.into()),
    };
    let named: &'static Named = Box::leak(Box::new(make(slot, route)));
    table.entry(route).or_default()[slot] = Some(named);
    Some(named)
}

fn make(slot: usize, route: &'static str) -> Named {
    if slot == GRPC_SLOT {
        let name = route.strip_prefix('/').unwrap_or(route);
        return Named { name, route, grpc: crate::grpc::service_and_method(route) };
    }
    let method = crate::method_name(&SLOT_METHODS[slot]);
    let name: &'static str = Box::leak(format!("{method} {route}").into_boxed_str());
    Named { name, route, grpc: None }
}

const SLOT_METHODS: [Method; 9] = [
    Method::GET,
    Method::POST,
    Method::PUT,
    Method::DELETE,
    Method::HEAD,
    Method::OPTIONS,
    Method::CONNECT,
    Method::PATCH,
    Method::TRACE,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_made_once_and_read_back_from_any_thread() {
        let get = route(&Method::GET, "/names-test/{id}").unwrap();
        assert_eq!((get.name, get.route, get.grpc), ("GET /names-test/{id}", "/names-test/{id}", None));
        // The same name, not another one made: from this thread's cache,
        // and from the program's table on another thread.
        assert!(std::ptr::eq(get, route(&Method::GET, "/names-test/{id}").unwrap()));
        let elsewhere = std::thread::spawn(|| route(&Method::GET, "/names-test/{id}").unwrap());
        assert!(std::ptr::eq(get, elsewhere.join().unwrap()));
        let post = route(&Method::POST, "/names-test/{id}").unwrap();
        assert_eq!(post.name, "POST /names-test/{id}");
        assert!(std::ptr::eq(post.route, get.route), "one route for its methods");
        assert!(route(&Method::from_bytes(b"PURGE").unwrap(), "/names-test/{id}").is_none());

        let call = grpc("/pkg.Svc/Get").unwrap();
        assert_eq!(
            (call.name, call.route, call.grpc),
            ("pkg.Svc/Get", "/pkg.Svc/Get", Some(("pkg.Svc", "Get")))
        );
        assert_eq!(grpc("/broken").unwrap().grpc, None);
    }

    #[test]
    fn past_the_bound_no_name_is_kept() {
        let names = Names::new((None, 0));
        let first = intern(&names, 2, 0, "/a").unwrap();
        assert_eq!(intern(&names, 2, 1, "/a").unwrap().name, "POST /a");
        assert!(intern(&names, 2, 0, "/b").is_none(), "the third name");
        assert!(std::ptr::eq(first, intern(&names, 2, 0, "/a").unwrap()), "those kept still are");
    }
}
