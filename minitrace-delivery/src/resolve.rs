//! Name resolution for the [`HttpClient`](crate::HttpClient).
//!
//! ureq resolves the endpoint's host before every request, even one that
//! goes out on a kept-alive connection, and with a timeout set (the
//! client always sets one) its default resolver does so on a new thread:
//! a thread started and torn down for each body, an IP literal included
//! (the export bench, 1 producer, 2 M spans to 127.0.0.1: 662 threads
//! started under strace; 7 with this resolver). This resolver answers an
//! IP literal itself, and keeps a host name's addresses for
//! [`REUSE_FOR`]; a name not yet known, or known longer ago, is looked up
//! by ureq's resolver, with the timeout. The lookup holds the resolver's
//! lock: a client's other requests wait for its answer rather than look
//! up again.

use std::fmt;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ureq::config::Config;
use ureq::http::Uri;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::NextTimeout;

/// How long a host name's addresses are used without a new lookup: a
/// connection made later than that to a host that moved finds it.
pub(crate) const REUSE_FOR: Duration = Duration::from_secs(1);

/// The addresses of the last host name looked up, and when.
struct Known {
    uri_authority: String,
    at: Instant,
    addrs: ResolvedSocketAddrs,
}

/// See the module's documentation. Clones share what they know: the
/// client keeps one to read [`lookups`](Self::lookups), the agent the other.
#[derive(Clone, Default)]
pub(crate) struct CachingResolver(Arc<State>);

#[derive(Default)]
struct State {
    last: Mutex<Option<Known>>,
    /// Lookups handed to ureq's resolver (on a thread of their own).
    lookups: AtomicU64,
}

impl fmt::Debug for CachingResolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CachingResolver").field("lookups", &self.lookups()).finish_non_exhaustive()
    }
}

impl CachingResolver {
    /// Lookups handed to ureq's resolver so far.
    pub(crate) fn lookups(&self) -> u64 {
        self.0.lookups.load(Ordering::Relaxed)
    }
}

fn is_ip_literal(host: &str) -> bool {
    host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host).parse::<IpAddr>().is_ok()
}

impl Resolver for CachingResolver {
    fn resolve(
        &self,
        uri: &Uri,
        config: &Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let default = DefaultResolver::default();
        if uri.host().is_some_and(is_ip_literal) {
            // Parsed, not looked up: with no timeout, ureq's resolver does
            // it on this thread.
            return default.resolve(uri, config, NextTimeout::default());
        }
        let authority = uri.authority().map_or("", |a| a.as_str());
        let now = Instant::now();
        let mut last = self.0.last.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(known) = last.as_ref() {
            if known.uri_authority == authority && now.saturating_duration_since(known.at) < REUSE_FOR {
                return Ok(known.addrs.clone());
            }
        }
        self.0.lookups.fetch_add(1, Ordering::Relaxed);
        // A failure is not kept: the next request looks up again.
        let addrs = default.resolve(uri, config, timeout)?;
        *last = Some(Known { uri_authority: authority.to_owned(), at: now, addrs: addrs.clone() });
        Ok(addrs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Config {
        ureq::Agent::config_builder().build()
    }

    fn resolve(resolver: &CachingResolver, url: &str) -> Result<Vec<std::net::SocketAddr>, ureq::Error> {
        let uri: Uri = url.parse().unwrap();
        let timeout = NextTimeout { after: Duration::from_secs(5).into(), ..NextTimeout::default() };
        Ok(resolver.resolve(&uri, &config(), timeout)?.iter().copied().collect())
    }

    #[test]
    fn an_ip_literal_is_answered_without_a_lookup() {
        let resolver = CachingResolver::default();
        for _ in 0..3 {
            assert_eq!(
                resolve(&resolver, "http://127.0.0.1:4318/v1/traces").unwrap(),
                ["127.0.0.1:4318".parse().unwrap()]
            );
            assert_eq!(resolve(&resolver, "http://[::1]:80/").unwrap(), ["[::1]:80".parse().unwrap()]);
            assert_eq!(resolve(&resolver, "https://10.1.2.3/").unwrap(), ["10.1.2.3:443".parse().unwrap()]);
        }
        assert_eq!(resolver.lookups(), 0);
    }

    #[test]
    fn a_host_name_is_looked_up_once_per_reuse_period_and_per_host() {
        let resolver = CachingResolver::default();
        let first = resolve(&resolver, "http://localhost:4318/v1/traces").unwrap();
        assert!(first.iter().all(|addr| addr.ip().is_loopback() && addr.port() == 4318), "{first:?}");
        assert_eq!(resolve(&resolver, "http://localhost:4318/other").unwrap(), first);
        assert_eq!(resolver.lookups(), 1);
        // Another port is another authority: looked up.
        let other = resolve(&resolver, "http://localhost:9411/").unwrap();
        assert!(other.iter().all(|addr| addr.port() == 9411), "{other:?}");
        assert_eq!(resolver.lookups(), 2);
        // Once the answer is older than the reuse period, looked up again.
        resolver.0.last.lock().unwrap().as_mut().unwrap().at -= REUSE_FOR;
        resolve(&resolver, "http://localhost:9411/").unwrap();
        assert_eq!(resolver.lookups(), 3);
    }

    #[test]
    fn the_client_resolves_through_it() {
        use crate::{Attempt, Endpoint, HttpClient};
        use minitrace_delivery_testkit::{Answer, Server};

        let server = Server::start(vec![Answer::status(200); 10]);
        let port = server.addr().port();
        for (host, lookups) in [("127.0.0.1", 0), ("localhost", 1)] {
            let client = HttpClient::new(
                Endpoint::parse(&format!("http://{host}:{port}/v1/traces")).unwrap(),
                "text/plain",
            );
            for _ in 0..5 {
                assert!(matches!(client.post(b"body", Duration::from_secs(5)), Attempt::Delivered { .. }));
            }
            assert_eq!(client.resolver.lookups(), lookups, "{host}");
        }
        assert_eq!(server.received().len(), 10);
    }

    #[test]
    fn a_failed_lookup_is_not_kept() {
        let resolver = CachingResolver::default();
        // `.invalid` never resolves (RFC 6761).
        assert!(resolve(&resolver, "http://nothing.invalid:80/").is_err());
        assert!(resolve(&resolver, "http://nothing.invalid:80/").is_err());
        assert_eq!(resolver.lookups(), 2);
    }
}
