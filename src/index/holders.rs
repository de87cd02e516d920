//! How the index stores a block's holders in one `u64` table value.
//!
//! With up to 64 workers the value is the bit set of holders. With more, bit 63 clear means the
//! value lists up to three worker ids inline; set, its low 32 bits name a slot of a side array of
//! bit sets (one `u64` per 64 workers) that holds them, or are all ones ([`EVERYONE`]): every
//! worker holds the block (a system prompt shared cluster-wide), which matching then passes
//! without touching the side array, whatever the worker count.

use crate::worker_set;

// The table's value with more than 64 workers: bit 63 set means "bits 0..32 are a slot of
// `KvIndex::holders`"; clear, bits 60..62 count the inline ids (1 to 3) and bits 0..60 hold them,
// 20 bits each, the first in the lowest bits.
pub(super) const SPILLED: u64 = 1 << 63;
pub(super) const ID_BITS: u32 = 20;
pub(super) const ID_MASK: u64 = (1 << ID_BITS) - 1;
pub(super) const COUNT_SHIFT: u32 = 60;
pub(super) const INLINE_MAX: u64 = 3;
/// The value of a block held by exactly the index's workers, all of them (never a slot: slots
/// stay below `u32::MAX`).
pub(super) const EVERYONE: u64 = SPILLED | u32::MAX as u64;

pub(super) fn inline_count(value: u64) -> u64 {
    value >> COUNT_SHIFT
}

pub(super) fn inline_id(value: u64, i: u64) -> usize {
    ((value >> (ID_BITS as u64 * i)) & ID_MASK) as usize
}

pub(super) fn inline_ids(value: u64) -> impl Iterator<Item = usize> {
    (0..inline_count(value)).map(move |i| inline_id(value, i))
}

/// Whether `worker` is among `value`'s inline ids (without a branch per id).
#[inline]
pub(super) fn inline_has(value: u64, worker: usize) -> bool {
    let n = inline_count(value);
    let worker = worker as u64;
    ((n > 0) & (value & ID_MASK == worker))
        | ((n > 1) & ((value >> ID_BITS) & ID_MASK == worker))
        | ((n > 2) & ((value >> (2 * ID_BITS)) & ID_MASK == worker))
}

/// `value` with `worker` appended to its inline ids (which must have room).
pub(super) fn inline_push(value: u64, worker: usize) -> u64 {
    let n = inline_count(value);
    let ids = value & !(u64::MAX << (ID_BITS as u64 * n));
    ids | ((worker as u64) << (ID_BITS as u64 * n)) | ((n + 1) << COUNT_SHIFT)
}

/// `value` without its `i`-th inline id (the last id takes its place).
pub(super) fn inline_remove(value: u64, i: u64) -> u64 {
    let n = inline_count(value) - 1;
    let last = inline_id(value, n) as u64;
    let ids = value & !(u64::MAX << (ID_BITS as u64 * n)) & !(ID_MASK << (ID_BITS as u64 * i));
    let ids = if i < n {
        ids | (last << (ID_BITS as u64 * i))
    } else {
        ids
    };
    ids | (n << COUNT_SHIFT)
}

/// Whether a table value (past 64 workers) names a slot of [`SpilledSets`].
#[inline]
pub(super) fn is_set(value: u64) -> bool {
    value & SPILLED != 0 && value != EVERYONE
}

/// Whether a table value past 64 workers lists `worker` (below the index's word count), given
/// the index's set of every worker and its spilled sets: the one test of membership that
/// matching, storing and removing share.
#[inline]
pub(super) fn lists(value: u64, worker: usize, everyone: &[u64], sets: &SpilledSets) -> bool {
    if value == EVERYONE {
        worker_set::contains(everyone, worker)
    } else if value & SPILLED != 0 {
        worker_set::contains(sets.set(value), worker)
    } else {
        inline_has(value, worker)
    }
}

/// The bit sets of blocks with more holders than fit inline, `words` words each, shared: blocks
/// whose holders one event changed alike (a chain of blocks stored or evicted together, the
/// common case along a shared prefix) point to one set, counted by how many table values name
/// it, and a set named more than once is copied before it changes. So a walk along a prefix
/// whose blocks have the same holders reads one set, and sees that each next block has the same
/// value as the one before (the same holders: nobody drops out) without reading anything.
#[derive(Clone, Debug, Default)]
pub(super) struct SpilledSets {
    words: usize,
    /// The sets, `words` words each, slot after slot.
    bits: Vec<u64>,
    /// How many table values name each slot (0: free).
    refs: Vec<u32>,
    free: Vec<u32>,
    /// Within one update, the last value changed and what it became: a run of blocks with one
    /// value (a set they share, or the same inline ids) gets one new value, a set copied once.
    became: Option<(u64, u64)>,
}

impl SpilledSets {
    /// No sets, of `words` words each.
    pub(super) fn new(words: usize) -> Self {
        SpilledSets {
            words,
            ..Default::default()
        }
    }

    /// The set a spilled `value` names.
    #[inline]
    pub(super) fn set(&self, value: u64) -> &[u64] {
        let start = value as u32 as usize * self.words;
        &self.bits[start..start + self.words]
    }

    /// Slots in use or free (each `words` words).
    #[cfg(test)]
    pub(super) fn slots(&self) -> usize {
        self.refs.len()
    }

    /// Free slots.
    #[cfg(test)]
    pub(super) fn free_slots(&self) -> usize {
        self.free.len()
    }

    /// Checks the counts against the table's `values` (every value of the table): each slot
    /// is named exactly as often as its count says, and the free slots are those named by none,
    /// each once.
    #[cfg(test)]
    pub(super) fn check_counts(&self, values: impl IntoIterator<Item = u64>) {
        let mut named = vec![0u32; self.refs.len()];
        for value in values.into_iter().filter(|&v| is_set(v)) {
            named[value as u32 as usize] += 1;
        }
        assert_eq!(
            named, self.refs,
            "each set's count is how many values name it"
        );
        let mut free = self.free.clone();
        free.sort_unstable();
        let unnamed: Vec<u32> = (0..self.refs.len() as u32)
            .filter(|&slot| self.refs[slot as usize] == 0)
            .collect();
        assert_eq!(
            free, unnamed,
            "the free slots are the unnamed ones, each once"
        );
    }

    /// Bytes allocated.
    pub(super) fn heap_bytes(&self) -> usize {
        self.bits.capacity() * 8 + self.refs.capacity() * 4 + self.free.capacity() * 4
    }

    /// Starts an update (a store or a removal of one worker over a list of blocks).
    pub(super) fn begin(&mut self) {
        self.became = None;
    }

    /// A new set of exactly `workers`, named once; returns the table value for it.
    pub(super) fn spill(&mut self, workers: impl IntoIterator<Item = usize>) -> u64 {
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                let slot = u32::try_from(self.refs.len())
                    .ok()
                    .filter(|&slot| slot < u32::MAX)
                    .expect("fewer than 2^32 - 1 spilled blocks");
                self.bits.resize(self.bits.len() + self.words, 0);
                self.refs.push(0);
                slot
            }
        };
        self.refs[slot as usize] = 1;
        let value = SPILLED | u64::from(slot);
        let start = slot as usize * self.words;
        let set = &mut self.bits[start..start + self.words];
        set.fill(0);
        for worker in workers {
            worker_set::insert(set, worker);
        }
        value
    }

    /// One table value no longer names the set of `value` ([`is_set`]).
    pub(super) fn release(&mut self, value: u64) {
        let slot = value as u32;
        let refs = &mut self.refs[slot as usize];
        *refs -= 1;
        if *refs == 0 {
            self.free.push(slot);
        }
    }

    /// What a table value `old` becomes when `change` turns its holders into a new value
    /// (inline ids, a set, `EVERYONE` or 0 for none), for each block of one update in turn: a
    /// block with the value of the block changed before it gets the same result without
    /// `change` (a run of blocks that shared a set shares its successor). A set named by
    /// this block alone changes in place through `in_place` instead, which says what the value
    /// became.
    pub(super) fn update(
        &mut self,
        old: u64,
        in_place: impl FnOnce(&mut [u64]) -> u64,
        change: impl FnOnce(&mut Self) -> u64,
    ) -> u64 {
        let spilled = is_set(old);
        if let Some((_, new)) = self.became.filter(|&(was, _)| was == old) {
            if is_set(new) {
                self.refs[new as u32 as usize] += 1;
            }
            if spilled {
                self.release(old);
            }
            return new;
        }
        let new = if spilled && self.refs[old as u32 as usize] == 1 {
            let start = old as u32 as usize * self.words;
            let new = in_place(&mut self.bits[start..start + self.words]);
            if new != old {
                self.release(old);
            }
            new
        } else {
            let new = change(self);
            if spilled {
                self.release(old);
            }
            new
        };
        self.became = Some((old, new));
        new
    }

    /// A new set, a copy of `value`'s set that `edit` then changes, named once.
    pub(super) fn copy(&mut self, value: u64, edit: impl FnOnce(&mut [u64])) -> u64 {
        let new = self.spill([]);
        let (from, to) = (
            value as u32 as usize * self.words,
            new as u32 as usize * self.words,
        );
        self.bits.copy_within(from..from + self.words, to);
        edit(&mut self.bits[to..to + self.words]);
        new
    }
}

/// Heap bytes of a std `HashMap` of `capacity` (as `HashMap::capacity` reports it) whose
/// (key, value) pairs take `pair` bytes: hashbrown allocates a power-of-two number of buckets
/// (`capacity` is 7/8 of them, or one less than them under 8), `pair + 1` bytes per bucket (the
/// pair and its control byte) and 16 more control bytes (one SSE2 group).
pub(super) fn table_bytes(capacity: usize, pair: usize) -> usize {
    if capacity == 0 {
        return 0;
    }
    let buckets = if capacity < 8 {
        (capacity + 1).next_power_of_two()
    } else {
        (capacity / 7 * 8).next_power_of_two()
    };
    buckets * (pair + 1) + 16
}
