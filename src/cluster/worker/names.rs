//! A KV pool's table from block name to slot: open addressing with linear probing, each entry
//! (name, slot and the slot's generation) in one 16-byte cell, four to a cache line.
//!
//! The pools' tables are the simulator's hottest memory: a worker stores and evicts one block
//! per 64 prompt tokens, and the tables together are larger than a core's cache, so a probe
//! nearly always misses it. Std's table spends two misses on a probe (the control bytes, then
//! the bucket) and another probe to remove a block; this one spends one miss on a probe and
//! none on a removal:
//!
//! - **Removal by generation.** Each slot has a generation, in a small array that stays in the
//!   cache; an entry is valid while its slot's generation is the one it was stored with.
//!   [`NameTable::forget`] removes a slot's block by bumping the generation: no probe, no cache
//!   miss. Stale entries stay in their cells until a sweep.
//! - **Sweeps.** When valid and stale entries fill half the cells, one pass in table order (so
//!   the memory is read in sequence, not at random) drops the stale entries, cluster by cluster,
//!   moving the valid ones back towards their home cells; the table doubles if valid entries
//!   alone fill a quarter of it. Positions change only then, and nothing outside keeps them.

use crate::hash::BlockHash;

/// A cell's slot when it holds no entry.
const EMPTY: u32 = u32::MAX;
/// The fewest cells a table has.
const MIN_CELLS: usize = 16;

#[derive(Clone, Copy, Debug)]
struct Cell {
    name: BlockHash,
    slot: u32,
    /// The slot's generation when the entry was stored.
    gen: u32,
}

const VACANT: Cell = Cell {
    name: BlockHash(0),
    slot: EMPTY,
    gen: 0,
};

/// Where a name is, or where it would go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probe {
    /// Held: its slot.
    Found(u32),
    /// Not held: the cell [`NameTable::insert_at`] should fill.
    Vacant(usize),
}

/// Block name → slot, for the blocks a pool holds.
#[derive(Clone, Debug)]
pub struct NameTable {
    cells: Vec<Cell>,
    /// Each slot's generation.
    gens: Vec<u32>,
    /// Cells holding an entry, valid or stale.
    used: usize,
    /// 64 − log2(cells): a name's home cell is the top bits of its mixed value.
    shift: u32,
    /// A sweep's scratch: the valid entries of one cluster.
    scratch: Vec<Cell>,
}

impl NameTable {
    /// A table sized for `expected` valid entries without growing.
    pub fn with_capacity(expected: usize) -> Self {
        let n = expected
            .saturating_mul(4)
            .next_power_of_two()
            .max(MIN_CELLS);
        NameTable {
            cells: vec![VACANT; n],
            gens: Vec::new(),
            used: 0,
            shift: 64 - n.trailing_zeros(),
            scratch: Vec::new(),
        }
    }

    fn home(&self, name: BlockHash) -> usize {
        // Names are uniform already; the multiply makes sequential test names spread too.
        (name.0.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    fn mask(&self) -> usize {
        self.cells.len() - 1
    }

    fn valid(&self, c: &Cell) -> bool {
        c.slot != EMPTY && self.gens[c.slot as usize] == c.gen
    }

    /// Every valid (name, slot), in table order.
    pub fn entries(&self) -> impl Iterator<Item = (BlockHash, u32)> + '_ {
        self.cells
            .iter()
            .filter(|c| self.valid(c))
            .map(|c| (c.name, c.slot))
    }

    /// The slot of `name`, if held.
    pub fn get(&self, name: BlockHash) -> Option<u32> {
        match self.probe(name) {
            Probe::Found(s) => Some(s),
            Probe::Vacant(_) => None,
        }
    }

    /// Finds `name`, or the cell where inserting it would go: its stale entry, else the empty
    /// cell that ends its search.
    pub fn probe(&self, name: BlockHash) -> Probe {
        let mask = self.mask();
        let mut i = self.home(name);
        loop {
            let c = &self.cells[i];
            if c.slot == EMPTY {
                return Probe::Vacant(i);
            }
            if c.name == name {
                return if self.valid(c) {
                    Probe::Found(c.slot)
                } else {
                    Probe::Vacant(i)
                };
            }
            i = (i + 1) & mask;
        }
    }

    /// Fills cell `at` (from [`NameTable::probe`] of `name`, with no change to the table in
    /// between) with `name` → `slot`, a slot no valid entry names. The table may sweep or grow
    /// (positions change).
    pub fn insert_at(&mut self, at: usize, name: BlockHash, slot: u32) {
        debug_assert!(slot != EMPTY);
        if self.gens.len() <= slot as usize {
            self.gens.resize(slot as usize + 1, 0);
        }
        let c = &mut self.cells[at];
        debug_assert!(
            c.slot == EMPTY || c.name == name,
            "an empty cell or the name's own"
        );
        if c.slot == EMPTY {
            self.used += 1;
        }
        *c = Cell {
            name,
            slot,
            gen: self.gens[slot as usize],
        };
        if self.used * 2 > self.cells.len() {
            self.sweep();
        }
    }

    /// Removes the entry that names `slot` (if any): the slot may be given another name.
    pub fn forget(&mut self, slot: u32) {
        if let Some(g) = self.gens.get_mut(slot as usize) {
            *g = g.wrapping_add(1);
        }
    }

    /// Drops every stale entry, moving each cluster's valid entries back towards their homes
    /// (in their order, so each lands at or before its old cell, inside its cluster); doubles
    /// the table if valid entries fill a quarter of it.
    fn sweep(&mut self) {
        let n = self.cells.len();
        let mask = self.mask();
        let Some(start) = self.cells.iter().position(|c| c.slot == EMPTY) else {
            unreachable!("at most half the cells are used");
        };
        let mut scratch = std::mem::take(&mut self.scratch);
        let mut valid = 0;
        let mut k = 1;
        while k < n {
            let i = (start + k) & mask;
            if self.cells[i].slot == EMPTY {
                k += 1;
                continue;
            }
            // The cluster [i, j): its entries' homes all lie in it (the cell before is empty).
            scratch.clear();
            let mut len = 0;
            while self.cells[(i + len) & mask].slot != EMPTY {
                let at = (i + len) & mask;
                let c = self.cells[at];
                if self.valid(&c) {
                    scratch.push(c);
                }
                self.cells[at] = VACANT;
                len += 1;
            }
            for c in &scratch {
                let mut at = self.home(c.name);
                while self.cells[at].slot != EMPTY {
                    at = (at + 1) & mask;
                }
                self.cells[at] = *c;
            }
            valid += scratch.len();
            k += len;
        }
        self.used = valid;
        self.scratch = scratch;
        if valid * 4 > n {
            self.grow();
        }
    }

    /// Doubles the cells (every entry valid: called right after a sweep).
    fn grow(&mut self) {
        let n = self.cells.len() * 2;
        let old = std::mem::replace(&mut self.cells, vec![VACANT; n]);
        self.shift = 64 - n.trailing_zeros();
        let mask = self.mask();
        for c in old.into_iter().filter(|c| c.slot != EMPTY) {
            let mut at = self.home(c.name);
            while self.cells[at].slot != EMPTY {
                at = (at + 1) & mask;
            }
            self.cells[at] = c;
        }
    }

    /// Forgets every entry.
    pub fn clear(&mut self) {
        self.cells.fill(VACANT);
        self.used = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn agrees_with_a_map_through_inserts_forgets_sweeps_and_growth() {
        // Sequential and clustered names (the worst case for a table keyed on low bits), slots
        // reused as a pool reuses them.
        let mut t = NameTable::with_capacity(4);
        let mut reference: HashMap<u64, u32> = HashMap::new();
        let mut free: Vec<u32> = Vec::new();
        let mut next_slot = 0u32;
        let mut most = 0;
        for step in 0..40_000u64 {
            let name = BlockHash(step % 97 * 1_000 + step % 13);
            match t.probe(name) {
                Probe::Found(s) => {
                    assert_eq!(reference.get(&name.0), Some(&s));
                    if step % 3 == 0 {
                        t.forget(s);
                        reference.remove(&name.0);
                        free.push(s);
                    }
                }
                Probe::Vacant(at) => {
                    assert!(!reference.contains_key(&name.0), "step {step}");
                    let s = free.pop().unwrap_or_else(|| {
                        next_slot += 1;
                        next_slot - 1
                    });
                    t.insert_at(at, name, s);
                    reference.insert(name.0, s);
                }
            }
            most = most.max(reference.len());
            if step % 1_000 == 0 {
                for (&n, &s) in &reference {
                    assert_eq!(t.get(BlockHash(n)), Some(s), "step {step}");
                }
            }
        }
        let mut entries: Vec<(u64, u32)> = t.entries().map(|(n, s)| (n.0, s)).collect();
        entries.sort_unstable();
        let mut want: Vec<(u64, u32)> = reference.into_iter().collect();
        want.sort_unstable();
        assert_eq!(entries, want);
        assert_eq!(t.get(BlockHash(u64::MAX)), None);
        assert!(
            t.cells.len() <= 8 * most.next_power_of_two(),
            "{} cells for at most {most} entries",
            t.cells.len()
        );
    }
}
