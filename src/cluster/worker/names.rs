//! A KV pool's table from block name to slot: open addressing with linear probing, each entry
//! in one 8-byte cell (a 32-bit fingerprint of the name and the slot), eight to a cache line, at
//! most half the cells full.
//!
//! The pools' tables are the simulator's hottest memory: a worker stores and evicts one block
//! per 64 prompt tokens, and the tables together are larger than a core's cache, so nearly every
//! probe misses it. Std's table spends two misses on a probe (the control bytes, then the
//! bucket); this one spends one, on cells half the size of a (name, slot) pair, so twice as many
//! stay in the cache. A fingerprint may repeat, so a probe confirms a match by the name in the
//! slot (which the pool reads next anyway); a removal knows its slot and needs no confirmation.
//! A removal shifts the entries after it back into the gap (no tombstones, so probes stay short
//! without rebuilds).

use crate::hash::BlockHash;

/// A cell's slot when it holds no entry.
const EMPTY: u32 = u32::MAX;
/// The fewest cells a table has.
const MIN_CELLS: usize = 16;
/// The most cells a table has: a home cell is taken from the fingerprint's 32 bits.
const MAX_CELLS: usize = 1 << 32;

/// One entry: the fingerprint in the high 32 bits, the slot in the low 32 (`EMPTY`: vacant).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Cell(u64);

const VACANT: Cell = Cell(EMPTY as u64);

impl Cell {
    fn new(fingerprint: u32, slot: u32) -> Self {
        Cell(u64::from(fingerprint) << 32 | u64::from(slot))
    }

    fn fingerprint(self) -> u32 {
        (self.0 >> 32) as u32
    }

    fn slot(self) -> u32 {
        self.0 as u32
    }

    fn is_vacant(self) -> bool {
        self.slot() == EMPTY
    }
}

/// A name's fingerprint: the top 32 bits of its mixed value (whose top bits are its home cell).
fn fingerprint(name: BlockHash) -> u32 {
    // Names are uniform already; the multiply makes sequential test names spread too.
    (name.0.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as u32
}

/// Where a name is, or where it would go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probe {
    /// Held: its slot.
    Found(u32),
    /// Not held: the cell [`NameTable::insert_at`] should fill.
    Vacant(usize),
}

/// Block name → slot, for the blocks a pool holds. The names live in the pool's slots: lookups
/// take `name_of`, the name in a slot.
#[derive(Clone, Debug)]
pub struct NameTable {
    cells: Vec<Cell>,
    live: usize,
    /// 32 − log2(cells): a name's home cell is the top bits of its fingerprint.
    shift: u32,
}

impl NameTable {
    /// The cells of a table sized for `expected` entries.
    fn cells_for(expected: usize) -> usize {
        expected
            .saturating_mul(2)
            .checked_next_power_of_two()
            .unwrap_or(MAX_CELLS)
            .clamp(MIN_CELLS, MAX_CELLS)
    }

    /// The bytes [`NameTable::with_capacity`] allocates for `expected` entries (for the run's
    /// memory estimate, before anything is allocated).
    pub fn bytes_for(expected: usize) -> u64 {
        Self::cells_for(expected) as u64 * std::mem::size_of::<Cell>() as u64
    }

    /// A table sized for `expected` entries without growing.
    pub fn with_capacity(expected: usize) -> Self {
        let n = Self::cells_for(expected);
        NameTable {
            cells: vec![VACANT; n],
            live: 0,
            shift: 32 - n.trailing_zeros(),
        }
    }

    fn home(&self, fingerprint: u32) -> usize {
        (fingerprint >> self.shift) as usize
    }

    fn mask(&self) -> usize {
        self.cells.len() - 1
    }

    /// Every slot, in table order.
    pub fn slots(&self) -> impl Iterator<Item = u32> + '_ {
        self.cells
            .iter()
            .filter(|c| !c.is_vacant())
            .map(|c| c.slot())
    }

    /// The slot of `name`, if held.
    pub fn get(&self, name: BlockHash, name_of: impl Fn(u32) -> BlockHash) -> Option<u32> {
        match self.probe(name, name_of) {
            Probe::Found(s) => Some(s),
            Probe::Vacant(_) => None,
        }
    }

    /// Finds `name`, or the empty cell where inserting it would go.
    pub fn probe(&self, name: BlockHash, name_of: impl Fn(u32) -> BlockHash) -> Probe {
        let fp = fingerprint(name);
        let mask = self.mask();
        let mut i = self.home(fp);
        loop {
            let c = self.cells[i];
            if c.is_vacant() {
                return Probe::Vacant(i);
            }
            if c.fingerprint() == fp && name_of(c.slot()) == name {
                return Probe::Found(c.slot());
            }
            i = (i + 1) & mask;
        }
    }

    /// Fills cell `at` (from [`NameTable::probe`] of `name`, with no change to the table in
    /// between) with `name` → `slot`. The table may grow (every position changes).
    pub fn insert_at(&mut self, at: usize, name: BlockHash, slot: u32) {
        debug_assert!(slot != EMPTY && self.cells[at].is_vacant());
        self.cells[at] = Cell::new(fingerprint(name), slot);
        self.live += 1;
        if self.live * 2 > self.cells.len() {
            self.grow();
        }
    }

    /// Removes `name`, which the table holds at `slot`, shifting the entries after it back.
    pub fn remove(&mut self, name: BlockHash, slot: u32) {
        let entry = Cell::new(fingerprint(name), slot);
        let mask = self.mask();
        let mut hole = self.home(entry.fingerprint());
        while self.cells[hole] != entry {
            debug_assert!(
                !self.cells[hole].is_vacant(),
                "removing a name the table does not hold"
            );
            hole = (hole + 1) & mask;
        }
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let c = self.cells[j];
            if c.is_vacant() {
                break;
            }
            // `c` may fill the hole unless its home lies cyclically in (hole, j].
            let home = self.home(c.fingerprint());
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
        assert!(n <= MAX_CELLS, "a KV pool of fewer than 2^31 blocks");
        let old = std::mem::replace(&mut self.cells, vec![VACANT; n]);
        self.shift = 32 - n.trailing_zeros();
        let mask = self.mask();
        for c in old.into_iter().filter(|c| !c.is_vacant()) {
            let mut i = self.home(c.fingerprint());
            while !self.cells[i].is_vacant() {
                i = (i + 1) & mask;
            }
            self.cells[i] = c;
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
        let mut names: Vec<BlockHash> = Vec::new(); // slot -> name, as the pool keeps them
        for step in 0..30_000u64 {
            let name = BlockHash(step % 97 * 1_000 + step % 13);
            match t.probe(name, |s| names[s as usize]) {
                Probe::Found(s) => {
                    assert_eq!(reference.get(&name.0), Some(&s));
                    if step % 3 == 0 {
                        t.remove(name, s);
                        reference.remove(&name.0);
                    }
                }
                Probe::Vacant(at) => {
                    assert!(!reference.contains_key(&name.0));
                    let slot = names.len() as u32;
                    names.push(name);
                    t.insert_at(at, name, slot);
                    reference.insert(name.0, slot);
                }
            }
            assert_eq!(t.live, reference.len());
            if step % 1_000 == 0 {
                for (&n, &s) in &reference {
                    assert_eq!(
                        t.get(BlockHash(n), |s| names[s as usize]),
                        Some(s),
                        "step {step}"
                    );
                }
            }
        }
        let mut slots: Vec<u32> = t.slots().collect();
        slots.sort_unstable();
        let mut want: Vec<u32> = reference.into_values().collect();
        want.sort_unstable();
        assert_eq!(slots, want);
        assert_eq!(t.get(BlockHash(u64::MAX), |s| names[s as usize]), None);
    }

    #[test]
    fn names_with_the_same_fingerprint_are_told_apart_by_their_slots() {
        // Names whose mixed values differ only in their low 32 bits share a fingerprint.
        let inverse = 0xF1DE_83E1_9937_733Du64; // of 0x9E37_79B9_7F4A_7C15, modulo 2^64
        assert_eq!(inverse.wrapping_mul(0x9E37_79B9_7F4A_7C15), 1);
        let names: Vec<BlockHash> = (0..6u64)
            .map(|low| BlockHash(((0xABCD_u64 << 32) | low).wrapping_mul(inverse)))
            .collect();
        assert!(names
            .iter()
            .all(|n| fingerprint(*n) == fingerprint(names[0])));
        let mut t = NameTable::with_capacity(16);
        let name_of = |s: u32| names[s as usize];
        for (s, &n) in names.iter().enumerate().take(4) {
            let Probe::Vacant(at) = t.probe(n, name_of) else {
                panic!("name {s} not stored yet");
            };
            t.insert_at(at, n, s as u32);
        }
        for (s, &n) in names.iter().enumerate() {
            let want = (s < 4).then_some(s as u32);
            assert_eq!(t.get(n, name_of), want, "name {s}");
        }
        t.remove(names[1], 1);
        assert_eq!(t.get(names[1], name_of), None);
        assert_eq!(t.get(names[2], name_of), Some(2));
        assert_eq!(t.get(names[3], name_of), Some(3));
    }
}
