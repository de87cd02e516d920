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

/// A free or new slot of `holders` holding exactly `workers`; returns the table value for it.
pub(super) fn spill(
    holders: &mut Vec<u64>,
    free_slots: &mut Vec<u32>,
    words: usize,
    workers: impl IntoIterator<Item = usize>,
) -> u64 {
    let slot = match free_slots.pop() {
        Some(slot) => slot,
        None => {
            let slot = u32::try_from(holders.len() / words)
                .ok()
                .filter(|&slot| slot < u32::MAX)
                .expect("fewer than 2^32 - 1 spilled blocks");
            holders.resize(holders.len() + words, 0);
            slot
        }
    };
    let value = SPILLED | u64::from(slot);
    let set = set_mut(holders, words, value);
    set.fill(0);
    for worker in workers {
        worker_set::insert(set, worker);
    }
    value
}

/// The bit set a spilled `value` points to, mutably.
pub(super) fn set_mut(holders: &mut [u64], words: usize, value: u64) -> &mut [u64] {
    let start = value as u32 as usize * words;
    &mut holders[start..start + words]
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
