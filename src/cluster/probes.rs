//! What a run watches its actors with, beside what they do: the ground truth that attributes
//! misses, the audit of the routers' index, and the timeline `--perfetto` draws. Each is there
//! only when the run asked for it; none changes a decision, so a run's results are the same
//! with or without them.
//!
//! The signal board is not a probe: routers decide on what workers post there.

use super::audit::SharedAudit;
use super::timeline::SharedTimeline;
use super::truth::SharedTruth;

/// An actor's instrumentation handles (shared by every actor of the run that holds them).
#[derive(Clone, Default)]
pub struct Probes {
    /// Ground truth for loss attribution (`None`: misses are not attributed).
    pub truth: Option<SharedTruth>,
    /// The audit of the routers' index (`None`: not audited; a worker reports its cache's
    /// changes to it, a router what it believes).
    pub audit: Option<SharedAudit>,
    /// Where steps, levels and losses are noted (`None`: the run keeps no timeline; routers
    /// note nothing).
    pub timeline: Option<SharedTimeline>,
}
