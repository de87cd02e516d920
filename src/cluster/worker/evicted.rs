//! A worker's memory of the blocks it lost: bounded, approximate, cheap.
//!
//! Loss attribution asks whether a block a request missed was held by the worker and lost
//! (evicted, or gone in a restart) or never computed. Remembering every block ever held would
//! grow with the run's history, so the memory is two generations of a Bloom filter: a lost
//! block goes into the current generation; once a generation has taken `span` blocks it becomes
//! the previous one and a fresh one starts. A block is remembered for at least `span` and at
//! most `2 · span` losses after its own (a worker's `span` is its KV capacity). Each generation
//! has 32 bits per block and 3 probes, so a block never lost is "remembered" with probability
//! about 0.07 % (a miss then counts as capacity instead of routing or cold).

use crate::hash::BlockHash;

/// Bits per remembered block in a generation.
const BITS_PER_BLOCK: usize = 32;

/// Lost blocks, remembered for `span` to `2 · span` losses.
#[derive(Clone, Debug)]
pub struct EvictionMemory {
    current: Vec<u64>,
    previous: Vec<u64>,
    /// Bits per generation − 1 (a power of two minus one).
    mask: u64,
    span: usize,
    in_current: usize,
    /// Whether a generation ever filled (the previous one then holds blocks).
    rotated: bool,
}

impl EvictionMemory {
    /// A memory of `span` (at least 1) lost blocks per generation.
    pub fn new(span: usize) -> Self {
        let bits = (span.max(1) * BITS_PER_BLOCK).next_power_of_two().max(64);
        EvictionMemory {
            current: vec![0; bits / 64],
            previous: vec![0; bits / 64],
            mask: bits as u64 - 1,
            span: span.max(1),
            in_current: 0,
            rotated: false,
        }
    }

    /// The memory's span: blocks per generation.
    pub fn span(&self) -> usize {
        self.span
    }

    fn probes(&self, block: BlockHash) -> [u64; 3] {
        // Block names are uniform 64-bit values: two of them derived by multiplication give the
        // three probes (double hashing).
        // (The high half of a product depends on every bit of the name; rotated into the low
        // bits, it is independent of the name's own low bits.)
        let a = block.0;
        let b = block.0.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(32) | 1;
        [
            a & self.mask,
            a.wrapping_add(b) & self.mask,
            a.wrapping_add(b.wrapping_mul(2)) & self.mask,
        ]
    }

    /// Whether nothing was ever lost (then it remembers nothing).
    pub fn is_empty(&self) -> bool {
        self.in_current == 0
    }

    /// Remembers that `block` was lost.
    pub fn insert(&mut self, block: BlockHash) {
        if self.in_current == self.span {
            std::mem::swap(&mut self.current, &mut self.previous);
            self.current.iter_mut().for_each(|w| *w = 0);
            self.in_current = 0;
            self.rotated = true;
        }
        for p in self.probes(block) {
            self.current[(p / 64) as usize] |= 1 << (p % 64);
        }
        self.in_current += 1;
    }

    /// Whether `block` was lost not long ago (or, rarely, a block never lost: see the module).
    pub fn contains(&self, block: BlockHash) -> bool {
        let probes = self.probes(block);
        let has = |g: &[u64]| {
            probes
                .iter()
                .all(|&p| g[(p / 64) as usize] & (1 << (p % 64)) != 0)
        };
        // An empty generation answers no without its bits being read (a pool that never
        // lost a block reads none: at 512 workers their bits are 64 MiB that miss the caches).
        (self.in_current > 0 && has(&self.current)) || (self.rotated && has(&self.previous))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::block_hashes;

    #[test]
    fn remembers_for_one_to_two_spans_and_rarely_imagines() {
        let names = block_hashes(&(0..16 * 40_000).collect::<Vec<u32>>(), 16);
        let mut m = EvictionMemory::new(1000);
        for b in &names[..1000] {
            m.insert(*b);
        }
        assert!(
            names[..1000].iter().all(|b| m.contains(*b)),
            "never forgets early"
        );
        for b in &names[1000..2000] {
            m.insert(*b);
        }
        assert!(
            names[..1000].iter().all(|b| m.contains(*b)),
            "kept for two spans"
        );
        m.insert(names[2000]);
        let kept = names[..1000].iter().filter(|b| m.contains(**b)).count();
        assert!(
            kept < 10,
            "forgotten after two spans (false positives aside): {kept}"
        );
        let imagined = names[10_000..].iter().filter(|b| m.contains(**b)).count();
        let rate = imagined as f64 / names[10_000..].len() as f64;
        assert!(rate < 0.002, "false positive rate {rate}");
    }
}
