//! Breadcrumbs: where a request has been, carried beside its trace context,
//! so that a trace's parts can be fetched from every process it touched.
//!
//! A process that runs a retrieval listener (see the crate's docs) has an
//! address (`host:port`). Requests carry it both ways:
//!
//! - **Leaving** a process, a request's W3C `tracestate` gets the entry
//!   [`TRACESTATE_KEY`]`=<this process's listener>` (first, as W3C asks of
//!   an entry a process updates), beside its `traceparent`.
//! - **Arriving**, the server reads it and keeps it on its root span as the
//!   property [`FROM_KEY`]: where the request came from. It answers with the
//!   header [`LISTENER_HEADER`]`: <its own listener>`.
//! - **Back** at the caller, the client keeps that answer on its span as the
//!   property [`TO_KEY`]: where the request went.
//!
//! So each process's part of a trace names the listeners of its caller and
//! of its callees; a retrieval follows them (see the crate's docs). Only
//! socket addresses travel: anything else in these fields is ignored, and
//! nothing secret is ever put in them.
//!
//! The middlewares (`minitrace-tower`, `minitrace-reqwest`) call these
//! functions; a hand-written client or server can too:
//!
//! ```
//! use http::HeaderMap;
//! use minitrace::collector::{SpanContext, SpanId, TraceId};
//! use minitrace_remote::breadcrumbs;
//!
//! // The caller, its listener at 127.0.0.1:7001.
//! breadcrumbs::set_local_listener(Some("127.0.0.1:7001".parse().unwrap()));
//! let context = SpanContext::new(TraceId(1), SpanId(2));
//! let mut request = HeaderMap::new();
//! breadcrumbs::inject(&mut request, context, None);
//! assert_eq!(request["tracestate"], "mt=127.0.0.1:7001");
//!
//! // The callee reads it.
//! let incoming = breadcrumbs::extract(&request);
//! assert_eq!(incoming.context.unwrap().trace_id, context.trace_id);
//! assert_eq!(incoming.from, Some("127.0.0.1:7001".parse().unwrap()));
//! # breadcrumbs::set_local_listener(None);
//! ```

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::RwLock;

use http::header::HeaderName;
use http::{HeaderMap, HeaderValue};
use minitrace::collector::SpanContext;

/// The `tracestate` key of the breadcrumb: a sender's listener address.
pub const TRACESTATE_KEY: &str = "mt";
/// The response header that names the callee's listener.
pub const LISTENER_HEADER: &str = "minitrace-listener";
/// The property a server's root span keeps: the caller's listener.
pub const FROM_KEY: &str = "minitrace.from";
/// The property a client's span keeps: the callee's listener.
pub const TO_KEY: &str = "minitrace.to";

/// The W3C trace-context headers, named once: a look-up by name does not
/// parse it again.
static TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
static TRACESTATE: HeaderName = HeaderName::from_static("tracestate");
/// W3C: at most 32 list members in a `tracestate`.
const MAX_TRACESTATE_MEMBERS: usize = 32;
/// W3C: a `tracestate` of at most 512 characters must be propagated; a
/// longer one may be dropped, as here.
const MAX_TRACESTATE_LEN: usize = 512;

static LOCAL_LISTENER: RwLock<Option<(SocketAddr, String)>> = RwLock::new(None);
/// Whether [`LOCAL_LISTENER`] is set: a process without a listener reads
/// this flag per request, not the lock (whose read is a write to a line
/// every core shares).
static HAS_LISTENER: AtomicBool = AtomicBool::new(false);

/// Sets (or clears) this process's listener address, which requests
/// leaving it carry and answers name. the listener, when it starts,
/// sets it.
pub fn set_local_listener(address: Option<SocketAddr>) {
    let entry = address.map(|address| (address, address.to_string()));
    let mut listener = LOCAL_LISTENER.write().unwrap_or_else(|poisoned| poisoned.into_inner());
    HAS_LISTENER.store(entry.is_some(), Ordering::Relaxed);
    *listener = entry;
}

/// This process's listener address, if it runs one.
pub fn local_listener() -> Option<SocketAddr> {
    LOCAL_LISTENER
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .as_ref()
        .map(|(address, _)| *address)
}

fn local_listener_text() -> Option<String> {
    if !HAS_LISTENER.load(Ordering::Relaxed) {
        return None;
    }
    LOCAL_LISTENER
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .as_ref()
        .map(|(_, text)| text.clone())
}

/// A request's trace context as it arrived.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Incoming {
    /// The caller's span, from `traceparent` (`None`: none, or malformed).
    pub context: Option<SpanContext>,
    /// Whether the caller sampled the trace (`traceparent`'s flag).
    pub sampled: bool,
    /// The `tracestate` to keep on the root (see
    /// [`Span::with_tracestate`](minitrace::Span::with_tracestate)), as it
    /// arrived, when it is well-formed.
    pub tracestate: Option<String>,
    /// Where it came from: the caller's listener, from the breadcrumb.
    pub from: Option<SocketAddr>,
}

/// Reads a request's `traceparent`, `tracestate` and breadcrumb. Malformed
/// values are ignored, never an error: a request without a usable context
/// starts a trace of its own.
pub fn extract(headers: &HeaderMap) -> Incoming {
    let text = |name: &HeaderName| headers.get(name).and_then(|value| value.to_str().ok());
    let (context, sampled) =
        match text(&TRACEPARENT).and_then(SpanContext::decode_w3c_traceparent_with_sampled) {
            Some((context, sampled)) => (Some(context), sampled),
            None => (None, true),
        };
    // Only with a context: a tracestate belongs to the trace it arrived with.
    let tracestate = text(&TRACESTATE).filter(|_| context.is_some()).filter(|state| well_formed(state));
    let from =
        tracestate.and_then(|state| member(state, TRACESTATE_KEY)).and_then(|value| value.parse().ok());
    Incoming { context, sampled, tracestate: tracestate.map(str::to_owned), from }
}

/// Adds `traceparent` for `context` (sampled) and a `tracestate` whose
/// first entry is this process's breadcrumb (when it runs a listener),
/// followed by `tracestate`'s other entries (those of the trace's root, as
/// it arrived).
pub fn inject(headers: &mut HeaderMap, context: SpanContext, tracestate: Option<&str>) {
    headers.insert(TRACEPARENT.clone(), traceparent(context, true));
    let ours = local_listener_text().map(|address| format!("{TRACESTATE_KEY}={address}"));
    let others = tracestate.filter(|state| well_formed(state)).map(|state| without(state, TRACESTATE_KEY));
    let state = match (ours, others) {
        (Some(ours), Some(others)) if !others.is_empty() => {
            let mut members: Vec<&str> = others.split(',').map(str::trim).collect();
            members.truncate(MAX_TRACESTATE_MEMBERS - 1);
            format!("{ours},{}", members.join(","))
        }
        (Some(ours), _) => ours,
        (None, Some(others)) => others,
        (None, None) => return,
    };
    if state.len() <= MAX_TRACESTATE_LEN {
        if let Ok(value) = HeaderValue::from_str(&state) {
            headers.insert(TRACESTATE.clone(), value);
        }
    }
}

/// `traceparent`'s value for `context`, sampled or not, as
/// [`SpanContext::encode_w3c_traceparent_with_sampled`] spells it: written
/// in place rather than formatted, as a client adds one per call.
///
/// ```
/// use minitrace::collector::{SpanContext, SpanId, TraceId};
/// use minitrace_remote::breadcrumbs;
///
/// let value = breadcrumbs::traceparent(SpanContext::new(TraceId(1), SpanId(2)), false);
/// assert_eq!(value, "00-00000000000000000000000000000001-0000000000000002-00");
/// ```
pub fn traceparent(context: SpanContext, sampled: bool) -> HeaderValue {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut text = *b"00-00000000000000000000000000000000-0000000000000000-00";
    let mut write = |end: usize, mut value: u128, digits: usize| {
        for at in (end - digits..end).rev() {
            text[at] = HEX[(value & 0xf) as usize];
            value >>= 4;
        }
    };
    write(35, context.trace_id.0, 32);
    write(52, u128::from(context.span_id.0), 16);
    write(55, u128::from(sampled), 2);
    HeaderValue::from_bytes(&text).expect("hex digits and dashes are a valid header value")
}

/// Names this process's listener in a response (when it runs one).
pub fn mark_response(headers: &mut HeaderMap) {
    if let Some(address) = local_listener_text() {
        if let Ok(value) = HeaderValue::from_str(&address) {
            headers.insert(LISTENER_HEADER, value);
        }
    }
}

/// The callee's listener, from its answer.
pub fn read_response(headers: &HeaderMap) -> Option<SocketAddr> {
    headers.get(LISTENER_HEADER)?.to_str().ok()?.trim().parse().ok()
}

/// The breadcrumbs of a trace's records: every listener its spans name
/// (callers and callees), this process's own left out.
pub fn of_records(records: &[minitrace::collector::SpanRecord]) -> Vec<SocketAddr> {
    let own = local_listener();
    let mut found: Vec<SocketAddr> = records
        .iter()
        .flat_map(|record| record.properties.iter())
        .filter(|(key, _)| key == FROM_KEY || key == TO_KEY)
        .filter_map(|(_, value)| value.parse().ok())
        .filter(|address| Some(*address) != own)
        .collect();
    found.sort();
    found.dedup();
    found
}

/// W3C's shape of a `tracestate`: comma-separated `key=value` members,
/// printable ASCII, bounded in length and count.
fn well_formed(state: &str) -> bool {
    state.len() <= MAX_TRACESTATE_LEN
        && state.is_ascii()
        && state.split(',').filter(|member| !member.trim().is_empty()).count() <= MAX_TRACESTATE_MEMBERS
        && state.split(',').map(str::trim).filter(|member| !member.is_empty()).all(|member| {
            member.split_once('=').is_some_and(|(key, value)| {
                !key.is_empty()
                    && key
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_-*/@".contains(&b))
                    && !value.is_empty()
                    && value.bytes().all(|b| (0x20..=0x7e).contains(&b) && b != b',' && b != b'=')
            })
        })
}

/// The value of `key`'s member.
fn member<'a>(state: &'a str, key: &str) -> Option<&'a str> {
    state.split(',').map(str::trim).find_map(|member| member.strip_prefix(key)?.strip_prefix('='))
}

/// The members but `key`'s.
fn without(state: &str, key: &str) -> String {
    let members: Vec<&str> = state
        .split(',')
        .map(str::trim)
        .filter(|member| !member.is_empty() && member.split_once('=').is_none_or(|(k, _)| k != key))
        .collect();
    members.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use minitrace::collector::{SpanId, TraceId};

    #[test]
    fn malformed_or_forged_breadcrumbs_are_ignored() {
        let mut headers = HeaderMap::new();
        let context = SpanContext::new(TraceId(7), SpanId(9));
        headers
            .insert(TRACEPARENT.clone(), HeaderValue::from_str(&context.encode_w3c_traceparent()).unwrap());
        for (state, from) in [
            ("mt=127.0.0.1:9", Some("127.0.0.1:9")),
            ("vendor=x,mt=[::1]:9", Some("[::1]:9")),
            ("mt=not-an-address", None),
            ("mt=127.0.0.1:9,broken", None),
            ("MT=127.0.0.1:9", None),
            ("mt=http://user:secret@127.0.0.1:9", None),
        ] {
            headers.insert(TRACESTATE.clone(), HeaderValue::from_str(state).unwrap());
            let incoming = extract(&headers);
            assert_eq!(incoming.from, from.map(|from| from.parse().unwrap()), "{state}");
            assert_eq!(incoming.context, Some(context));
        }
        // A tracestate without a context is not kept.
        headers.remove(&TRACEPARENT);
        assert_eq!(extract(&headers), Incoming { sampled: true, ..Incoming::default() });
    }

    #[test]
    fn traceparent_is_what_the_context_encodes() {
        for context in [
            SpanContext::new(TraceId(1), SpanId(2)),
            SpanContext::new(TraceId(u128::MAX), SpanId(u64::MAX)),
            SpanContext::new(
                TraceId(0x0af7_6519_16cd_43dd_8448_eb21_1c80_319c),
                SpanId(0xb7ad_6b71_6920_3331),
            ),
        ] {
            for sampled in [true, false] {
                let expected = context.encode_w3c_traceparent_with_sampled(sampled);
                assert_eq!(traceparent(context, sampled), expected.as_str());
            }
        }
    }

    #[test]
    fn our_entry_goes_first_and_replaces_an_older_one() {
        set_local_listener(Some("127.0.0.1:7001".parse().unwrap()));
        let mut headers = HeaderMap::new();
        inject(&mut headers, SpanContext::random(), Some("mt=127.0.0.1:9,vendor=opaque"));
        assert_eq!(headers[&TRACESTATE], "mt=127.0.0.1:7001,vendor=opaque");
        set_local_listener(None);
        let mut headers = HeaderMap::new();
        inject(&mut headers, SpanContext::random(), Some("vendor=opaque"));
        assert_eq!(headers[&TRACESTATE], "vendor=opaque");
    }
}
