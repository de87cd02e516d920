//! A KV pool's evictable blocks in release order: the queue eviction takes from the front.
//!
//! Releasing a block appends an entry with what evicting it needs (its name and slot), so the
//! victims are read in order, not by chasing a linked list through memory (a cache miss per
//! victim, each waiting for the one before). Pinning an evictable block again withdraws its entry in place (its slot knows where
//! the entry is); withdrawn entries are skipped at the front and swept out once they outnumber
//! the others.

use std::collections::VecDeque;

use crate::hash::BlockHash;

/// An entry's slot once withdrawn.
const WITHDRAWN: u32 = u32::MAX;

/// One evictable block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Released {
    /// Its name.
    pub block: BlockHash,
    /// Its slot in the pool.
    pub slot: u32,
    /// Kept out of the pool's name table (a request's own tail): evicting it removes no name.
    pub unlisted: bool,
}

/// Evictable blocks, released longest ago first.
#[derive(Clone, Debug, Default)]
pub struct ReleaseQueue {
    entries: VecDeque<Released>,
    /// The number of the front entry (entries are numbered in push order, from 0, wrapping
    /// around 2^32: the queue never holds that many).
    front: u32,
    withdrawn: usize,
}

impl ReleaseQueue {
    /// Appends a released block; returns its entry's number (for [`ReleaseQueue::withdraw`]).
    pub fn push(&mut self, r: Released) -> u32 {
        debug_assert!(r.slot != WITHDRAWN);
        self.entries.push_back(r);
        self.front.wrapping_add(self.entries.len() as u32 - 1)
    }

    /// Withdraws entry `number` (its block was pinned again).
    pub fn withdraw(&mut self, number: u32) {
        let e = &mut self.entries[number.wrapping_sub(self.front) as usize];
        debug_assert!(e.slot != WITHDRAWN, "withdrawn twice");
        e.slot = WITHDRAWN;
        self.withdrawn += 1;
    }

    /// Takes the block released longest ago that is still evictable.
    pub fn pop(&mut self) -> Option<Released> {
        while let Some(e) = self.entries.pop_front() {
            self.front = self.front.wrapping_add(1);
            if e.slot == WITHDRAWN {
                self.withdrawn -= 1;
            } else {
                return Some(e);
            }
        }
        None
    }

    /// Whether withdrawn entries outnumber the others (by more than a few): time to
    /// [`ReleaseQueue::sweep`].
    pub fn needs_sweep(&self) -> bool {
        self.withdrawn > self.entries.len() - self.withdrawn + 64
    }

    /// Drops the withdrawn entries, keeping the others' order; `renumbered` learns each
    /// remaining entry's (slot, new number).
    pub fn sweep(&mut self, mut renumbered: impl FnMut(u32, u32)) {
        self.entries.retain(|e| e.slot != WITHDRAWN);
        self.withdrawn = 0;
        for (k, e) in self.entries.iter().enumerate() {
            renumbered(e.slot, self.front.wrapping_add(k as u32));
        }
    }

    /// Forgets every entry.
    pub fn clear(&mut self) {
        self.front = self.front.wrapping_add(self.entries.len() as u32);
        self.entries.clear();
        self.withdrawn = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(slot: u32) -> Released {
        Released {
            block: BlockHash(u64::from(slot) * 7),
            slot,
            unlisted: false,
        }
    }

    #[test]
    fn pops_in_release_order_skipping_withdrawn_entries_across_sweeps() {
        let mut q = ReleaseQueue::default();
        let mut number = std::collections::HashMap::new();
        for s in 0..200 {
            number.insert(s, q.push(r(s)));
        }
        for s in (0..200).filter(|s| s % 4 != 0) {
            q.withdraw(number[&s]);
        }
        assert!(q.needs_sweep());
        q.sweep(|s, n| {
            number.insert(s, n);
        });
        assert!(!q.needs_sweep());
        q.withdraw(number[&8]);
        number.insert(8, q.push(r(8))); // released again: now last
        assert_eq!(q.pop(), Some(r(0)));
        assert_eq!(q.pop(), Some(r(4)));
        assert_eq!(q.pop(), Some(r(12)), "8 went to the back");
        q.withdraw(number[&16]);
        assert_eq!(q.pop(), Some(r(20)));
        let rest: Vec<u32> = std::iter::from_fn(|| q.pop()).map(|e| e.slot).collect();
        assert_eq!(rest.first(), Some(&24));
        assert_eq!(rest.last(), Some(&8));
        assert_eq!(rest.len(), 50 - 5 + 1 - 1);
    }
}
