//! Hashers for the simulator's own integer keys, faster than std's SipHash (which defends against
//! adversarial keys that a simulation does not have). Neither affects results: no table's
//! iteration order reaches an output.

use std::hash::{BuildHasherDefault, Hasher};

/// Block names are already uniformly mixed xxh3 outputs, so tables keyed by them use the name as
/// its own hash.
#[derive(Default, Clone, Copy)]
pub struct IdentityHasher(u64);

impl Hasher for IdentityHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only reached for keys other than u64; fold them in (not used for block names).
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// `BuildHasher` for tables keyed by [`BlockHash`](crate::hash::BlockHash).
pub type BlockHashBuilder = BuildHasherDefault<IdentityHasher>;

/// For small or sequential integer ids (request ids, prefix ids): one multiply by the 64-bit
/// golden ratio spreads them over every bit, which the table's bucket index and tag both use.
#[derive(Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b));
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// `BuildHasher` for tables keyed by integer ids.
pub type IdBuilder = BuildHasherDefault<IdHasher>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn ids_spread_into_the_top_bits() {
        let b = IdBuilder::default();
        let tops: std::collections::BTreeSet<u64> =
            (0..128u64).map(|i| b.hash_one(i) >> 57).collect();
        assert!(
            tops.len() > 64,
            "sequential ids get varied 7-bit tags: {}",
            tops.len()
        );
    }
}
