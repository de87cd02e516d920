//! A KV pool's table from block name to slot: open addressing with linear probing, each entry
//! (name and slot) in one 16-byte cell, four to a cache line, at most half the cells full.
//!
//! The pools' tables are the simulator's hottest memory: a worker stores and evicts one block
//! per 64 prompt tokens, and the tables together are larger than a core's cache, so nearly every
//! probe misses it. Std's table spends two misses on a probe (the control bytes, then the
//! bucket); this one spends one. A removal shifts the entries after it back into the gap
//! (no tombstones, so probes stay short without rebuilds).

use crate::hash::BlockHash;

/// A cell's slot when it holds no entry.
const EMPTY: u32 = u32::MAX;
/// The fewest cells a table has.
const MIN_CELLS: usize = 16;

#[derive(Clone, Copy, Debug)]
struct Cell {
    name: BlockHash,
    slot: u32,
}

const VACANT: Cell = Cell {
    name: BlockHash(0),
    slot: EMPTY,
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
    live: usize,
    /// 64 − log2(cells): a name's home cell is the top bits of its mixed value.
    shift: u32,
}

impl NameTable {
    /// A table sized for `expected` entries without growing.
    pub fn with_capacity(expected: usize) -> Self {
        let n = expected
            .saturating_mul(2)
            .next_power_of_two()
            .max(MIN_CELLS);
        NameTable {
            cells: vec![VACANT; n],
            live: 0,
            shift: 64 - n.trailing_zeros(),
        }
    }

    fn home(&self, name: BlockHash) -> usize {
        // Names are uniform already; the multiply makes sequential test names spread too.
        (name.0.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    fn mask(&self) -> usize {
        self.cells.len() - 1
    }

    /// Every (name, slot), in table order.
    pub fn entries(&self) -> impl Iterator<Item = (BlockHash, u32)> + '_ {
        self.cells
            .iter()
            .filter(|c| c.slot != EMPTY)
            .map(|c| (c.name, c.slot))
    }

    /// The slot of `name`, if held.
    pub fn get(&self, name: BlockHash) -> Option<u32> {
        match self.probe(name) {
            Probe::Found(s) => Some(s),
            Probe::Vacant(_) => None,
        }
    }

    /// Finds `name`, or the empty cell where inserting it would go.
    pub fn probe(&self, name: BlockHash) -> Probe {
        match self.find(name) {
            Ok(at) => Probe::Found(self.cells[at].slot),
            Err(at) => Probe::Vacant(at),
        }
    }

    /// The cell holding `name`, or the empty cell that ends its search.
    fn find(&self, name: BlockHash) -> Result<usize, usize> {
        let mask = self.mask();
        let mut i = self.home(name);
        loop {
            let c = self.cells[i];
            if c.slot == EMPTY {
                return Err(i);
            }
            if c.name == name {
                return Ok(i);
            }
            i = (i + 1) & mask;
        }
    }

    /// Fills cell `at` (from [`NameTable::probe`] of `name`, with no change to the table in
    /// between) with `name` → `slot`. The table may grow (every position changes).
    pub fn insert_at(&mut self, at: usize, name: BlockHash, slot: u32) {
        debug_assert!(slot != EMPTY && self.cells[at].slot == EMPTY);
        self.cells[at] = Cell { name, slot };
        self.live += 1;
        if self.live * 2 > self.cells.len() {
            self.grow();
        }
    }

    /// Removes `name`, which the table holds, shifting the entries after it back.
    pub fn remove(&mut self, name: BlockHash) {
        let mut hole = self
            .find(name)
            .expect("removing a name the table does not hold");
        let mask = self.mask();
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let c = self.cells[j];
            if c.slot == EMPTY {
                break;
            }
            // `c` may fill the hole unless its home lies cyclically in (hole, j].
            let home = self.home(c.name);
            let stays = if hole <= j {
                hole < home && home <= j
            } else {
                hole < home || home <= j
            };
            if !stays {
                self.cells[hole] = c;
                hole = j;
            }
        }
        self.cells[hole] = VACANT;
        self.live -= 1;
    }

    /// Doubles the cells.
    fn grow(&mut self) {
        let n = self.cells.len() * 2;
        let old = std::mem::replace(&mut self.cells, vec![VACANT; n]);
        self.shift = 64 - n.trailing_zeros();
        for c in old.into_iter().filter(|c| c.slot != EMPTY) {
            let Probe::Vacant(at) = self.probe(c.name) else {
                unreachable!("names in a pool are distinct");
            };
            self.cells[at] = c;
        }
    }

    /// Forgets every entry (keeping the cells).
    pub fn clear(&mut self) {
        self.cells.fill(VACANT);
        self.live = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn agrees_with_a_map_through_inserts_removals_and_growth() {
        // Sequential and clustered names (the worst case for a table keyed on low bits).
        let mut t = NameTable::with_capacity(4);
        let mut reference: HashMap<u64, u32> = HashMap::new();
        let mut next_slot = 0u32;
        for step in 0..30_000u64 {
            let name = BlockHash(step % 97 * 1_000 + step % 13);
            match t.probe(name) {
                Probe::Found(s) => {
                    assert_eq!(reference.get(&name.0), Some(&s));
                    if step % 3 == 0 {
                        t.remove(name);
                        reference.remove(&name.0);
                    }
                }
                Probe::Vacant(at) => {
                    assert!(!reference.contains_key(&name.0));
                    t.insert_at(at, name, next_slot);
                    reference.insert(name.0, next_slot);
                    next_slot += 1;
                }
            }
            assert_eq!(t.live, reference.len());
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
    }
}
