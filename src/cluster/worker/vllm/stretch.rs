//! Decode stretches: a step that only decodes, with nothing admitted, repeats identically until a
//! request finishes, one needs a block the pool cannot give, or a message arrives. The whole
//! stretch (at most `block_size` steps, each one's duration from its own KV share) is planned
//! at once, and the blocks it will fill are taken now (at most one per running request).

use crate::engine::Nanos;

use super::{LogItem, StepScheduler};
use crate::cluster::worker::kv::Changes;

impl<T> StepScheduler<T> {
    /// Extends a decode-only first step (ending at `ends[0]`, its decoding requests holding
    /// `kv` tokens) into a stretch: until the first request finishes, at most `block_size`
    /// steps, and no further than the blocks the pool can give (taken now).
    pub(super) fn extend_stretch(
        &mut self,
        ends: &mut Vec<Nanos>,
        kv: u64,
        log: &mut Vec<LogItem>,
    ) {
        let bs = self.cfg.block_size as u64;
        let to_finish = self
            .running
            .iter()
            .map(|s| s.output - s.generated)
            .min()
            .expect("running requests");
        let max_steps = to_finish.min(bs);
        if max_steps <= 1 {
            return;
        }
        // Step at which each request first needs a block it does not hold.
        let mut crossings = std::mem::take(&mut self.crossings);
        crossings.clear();
        crossings.extend(self.running.iter().enumerate().filter_map(|(i, s)| {
            let held_tokens = (s.held_named + s.private) as u64 * bs;
            let step = held_tokens + 1 - s.computed;
            (step <= max_steps).then_some((step, i))
        }));
        crossings.sort_unstable();
        let available = self.pool.borrow().available();
        let steps = if crossings.len() <= available {
            max_steps
        } else {
            crossings[available].0 - 1
        };
        let growing = crossings.iter().take_while(|c| c.0 <= steps).count();
        if growing > 0 {
            let mut changes = Changes::default();
            self.pool
                .borrow_mut()
                .acquire(None, &[], growing, &mut changes, &mut Vec::new(), 0);
            for &(_, i) in &crossings[..growing] {
                self.running[i].private += 1;
            }
            if !changes.is_empty() {
                log.push(LogItem::Kv(changes));
            }
        }
        self.crossings = crossings;
        let n = self.running.len() as u64;
        for step in 1..steps {
            let kv_tokens = kv + n * step;
            let d = self.cfg.timing.step_ns(&self.decode_work(kv_tokens));
            let last = *ends.last().expect("non-empty");
            ends.push(last.saturating_add(d));
        }
    }
}
