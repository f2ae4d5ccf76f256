use crate::data::id::{SpanId, TraceId};

/// One place a span is reported: a trace, the parent within it, and the
/// collector's buffer for that trace. A span usually has one; a span with
/// several parents (a batch request) has one per parent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Target {
    /// The trace id's halves: a `u128` field would make every message
    /// 16-byte aligned, and so larger, for nothing.
    pub(crate) trace_id: [u64; 2],
    pub(crate) parent_id: SpanId,
    pub(crate) collect_id: u64,
}

impl Target {
    pub(crate) fn new(trace_id: TraceId, parent_id: SpanId, collect_id: u64) -> Target {
        Target { trace_id: [(trace_id.0 >> 64) as u64, trace_id.0 as u64], parent_id, collect_id }
    }

    /// The same trace and buffer, under another parent.
    pub(crate) fn with_parent(self, parent_id: SpanId) -> Target {
        Target { parent_id, ..self }
    }

    pub(crate) fn trace_id(&self) -> TraceId {
        TraceId(u128::from(self.trace_id[0]) << 64 | u128::from(self.trace_id[1]))
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Targets {
    One(Target),
    Many(Vec<Target>),
}

impl Targets {
    /// The targets of a child of the span these targets belong to.
    #[inline]
    pub(crate) fn with_parent(&self, parent_id: SpanId) -> Targets {
        match self {
            Targets::One(target) => Targets::One(target.with_parent(parent_id)),
            Targets::Many(targets) => {
                Targets::Many(targets.iter().map(|target| target.with_parent(parent_id)).collect())
            }
        }
    }

    pub(crate) fn as_slice(&self) -> &[Target] {
        match self {
            Targets::One(target) => std::slice::from_ref(target),
            Targets::Many(targets) => targets,
        }
    }

    pub(crate) fn first(&self) -> &Target {
        &self.as_slice()[0]
    }

    /// `None` for an empty list: such a span has nowhere to go.
    pub(crate) fn from_vec(mut targets: Vec<Target>) -> Option<Targets> {
        match targets.len() {
            0 => None,
            1 => targets.pop().map(Targets::One),
            _ => Some(Targets::Many(targets)),
        }
    }
}
