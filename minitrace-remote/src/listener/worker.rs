//! The listener's worker: each retrieval's parts reported here, then the
//! request passed on along the trace's breadcrumbs.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use minitrace::collector::TraceId;
use minitrace_delivery::{Attempt, Endpoint, HttpClient};

use super::{add, Body, Job, Shared, PATH};
use crate::breadcrumbs;

/// Trace ids handled lately, remembered so that a trace is handled once.
const REMEMBERED: usize = 1 << 14;
/// How long a handled trace id is remembered.
const REMEMBER_FOR: Duration = Duration::from_secs(60);
/// How long a forwarded request may take.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(2);
/// Retrievals waiting for their root to end here; more are not found.
const MAX_AWAITING: usize = 1 << 10;

/// The worker: each job's parts reported here, then passed on. A job that
/// came before its trace's root ended here waits (in `awaiting`) for the
/// recorder's hook to say the root was kept, then goes on as it came.
pub(super) fn work_on(jobs: mpsc::Receiver<Job>, shared: Arc<Shared>) {
    let mut worker =
        Worker { shared, recent: Recent::default(), awaiting: HashMap::new(), clients: HashMap::new() };
    loop {
        let job = match worker.awaiting.values().map(|(_, deadline)| *deadline).min() {
            None => jobs.recv().ok(),
            Some(deadline) => match jobs.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(job) => Some(job),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    worker.expire();
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => None,
            },
        };
        let Some(job) = job else { return };
        worker.take(job);
        worker.expire();
    }
}

struct Worker {
    shared: Arc<Shared>,
    recent: Recent,
    /// Jobs waiting for their trace's root to end here, and until when.
    awaiting: HashMap<TraceId, (Job, Instant)>,
    clients: HashMap<SocketAddr, HttpClient>,
}

impl Worker {
    fn take(&mut self, job: Job) {
        let counters = &self.shared.counters;
        let job = match self.awaiting.remove(&job.trace_id) {
            // The hook: the root it waited for was kept. The job goes on
            // as it came, with the processes it had visited.
            Some((waiting, _)) if job.local => waiting,
            waiting => {
                if let Some(waiting) = waiting {
                    self.awaiting.insert(job.trace_id, waiting);
                }
                if job.local {
                    add(&counters.triggered);
                }
                if !self.recent.first_time(job.trace_id) {
                    add(&counters.duplicates);
                    return;
                }
                job
            }
        };
        let Some(trace) = minitrace::recorder::report(job.trace_id) else {
            if self.awaiting.len() < MAX_AWAITING && !self.awaiting.contains_key(&job.trace_id) {
                add(&counters.awaited);
                let deadline = Instant::now() + self.shared.wait_for_roots;
                self.awaiting.insert(job.trace_id, (job, deadline));
            } else {
                add(&counters.not_found);
            }
            return;
        };
        add(&counters.found);
        self.forward(job, &trace.spans);
    }

    fn expire(&mut self) {
        let now = Instant::now();
        let counters = &self.shared.counters;
        self.awaiting.retain(|_, (_, deadline)| {
            let waiting = *deadline > now;
            if !waiting {
                add(&counters.not_found);
            }
            waiting
        });
    }

    /// Passes `job` on to the listeners `records`' breadcrumbs name.
    fn forward(&mut self, job: Job, records: &[minitrace::collector::SpanRecord]) {
        let shared = &self.shared;
        if job.hops == 0 {
            return;
        }
        let mut visited = job.visited;
        visited.push(shared.address);
        let next: Vec<SocketAddr> = breadcrumbs::of_records(records)
            .into_iter()
            .filter(|address| !visited.contains(address))
            .take(shared.max_fan_out)
            .collect();
        visited.extend(&next);
        let body = Body {
            trace_id: format!("{:032x}", job.trace_id.0),
            hops: job.hops - 1,
            visited: visited.iter().map(SocketAddr::to_string).collect(),
        };
        let Ok(body) = serde_json::to_vec(&body) else { return };
        for address in next {
            let client =
                self.clients.entry(address).or_insert_with(|| client_for(address, shared.token.as_deref()));
            match client.post(&body, FORWARD_TIMEOUT) {
                Attempt::Delivered { .. } => add(&shared.counters.forwarded),
                _ => add(&shared.counters.forward_failed),
            }
        }
        if self.clients.len() > 1_024 {
            self.clients.clear();
        }
    }
}

fn client_for(address: SocketAddr, token: Option<&str>) -> HttpClient {
    let endpoint = Endpoint::parse(&format!("http://{address}{PATH}")).expect("a socket address makes a URL");
    let mut client = HttpClient::new(endpoint, "application/json");
    if let Some(token) = token {
        let _ = client.add_header("authorization", &format!("Bearer {token}"));
    }
    client
}

/// Trace ids handled lately: each is handled once a minute at most.
#[derive(Default)]
struct Recent {
    order: VecDeque<(TraceId, Instant)>,
    seen: HashMap<TraceId, Instant>,
}

impl Recent {
    fn first_time(&mut self, trace_id: TraceId) -> bool {
        let now = Instant::now();
        while let Some(&(oldest, at)) = self.order.front() {
            if now.duration_since(at) < REMEMBER_FOR && self.order.len() < REMEMBERED {
                break;
            }
            self.order.pop_front();
            if self.seen.get(&oldest) == Some(&at) {
                self.seen.remove(&oldest);
            }
        }
        if self.seen.contains_key(&trace_id) {
            return false;
        }
        self.seen.insert(trace_id, now);
        self.order.push_back((trace_id, now));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trace_is_handled_once_a_while() {
        let mut recent = Recent::default();
        assert!(recent.first_time(TraceId(1)));
        assert!(!recent.first_time(TraceId(1)));
        assert!(recent.first_time(TraceId(2)));
    }
}
