use crate::collector::{SpanId, TraceId};

/// One place a span is reported: a trace, the parent within it, and the
/// collector's buffer for that trace. A span usually has one; a span with
/// several parents (a batch request) has one per parent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Target {
    pub(crate) trace_id: TraceId,
    pub(crate) parent_id: SpanId,
    pub(crate) collect_id: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Targets {
    One(Target),
    Many(Vec<Target>),
}

impl Targets {
    /// The targets of a child of the span these targets belong to.
    pub(crate) fn with_parent(&self, parent_id: SpanId) -> Targets {
        match self {
            Targets::One(target) => Targets::One(Target { parent_id, ..*target }),
            Targets::Many(targets) => {
                Targets::Many(targets.iter().map(|target| Target { parent_id, ..*target }).collect())
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
