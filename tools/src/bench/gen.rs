//! Keys, values and key distributions of `cellar bench`.
//!
//! Keys are decimal numbers zero-padded to `--key-size` bytes, so byte order is numeric order:
//! fillseq writes in key order and `readseq` sees keys in the order they were numbered. A
//! missing key is an existing one with `.` appended (db_bench's trick): it falls inside the key
//! range, so only the bloom filter or a block read can tell it is absent.
//!
//! Random numbers come from splitmix64, seeded per thread, so runs are reproducible and no
//! generator is shared between threads.

/// splitmix64: small, fast, statistically fine for load generation.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed` (thread `t` uses a seed derived from the run's seed and `t`).
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when `n == 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            // Multiply-shift: unbiased enough for a benchmark and free of division.
            ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
        }
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Formats key numbers into a reused buffer.
#[derive(Debug, Clone)]
pub struct Keys {
    size: usize,
}

impl Keys {
    /// Keys of `size` bytes.
    pub fn new(size: usize) -> Self {
        Keys { size }
    }

    /// Digits needed for `n`.
    pub fn digits(n: u64) -> usize {
        n.checked_ilog10().map_or(1, |d| d as usize + 1)
    }

    /// Key `k` into `out`: zero-padded to the key size (longer when `k` needs more digits).
    pub fn fill(&self, k: u64, out: &mut Vec<u8>) {
        out.clear();
        let d = Self::digits(k);
        out.resize(self.size.saturating_sub(d), b'0');
        out.extend_from_slice(k.to_string().as_bytes());
    }

    /// A key that is never written: key `k` with `.` appended.
    pub fn fill_missing(&self, k: u64, out: &mut Vec<u8>) {
        self.fill(k, out);
        out.push(b'.');
    }
}

/// Values: slices of one buffer of random bytes at random offsets, so a value costs no
/// generation time and values differ.
#[derive(Debug)]
pub struct Values {
    buf: Vec<u8>,
    size: usize,
}

impl Values {
    /// Values of `size` bytes.
    pub fn new(size: usize, seed: u64) -> Self {
        let len = (1usize << 20).max(size * 2);
        let mut rng = Rng::new(seed ^ 0x5eed);
        let buf = (0..len).map(|_| rng.next_u64() as u8).collect();
        Values { buf, size }
    }

    /// A value.
    pub fn get(&self, rng: &mut Rng) -> &[u8] {
        let span = (self.buf.len() - self.size) as u64;
        let off = rng.below(span + 1) as usize;
        &self.buf[off..off + self.size]
    }
}

/// YCSB's zipfian generator (Gray et al., "Quickly generating billion-record synthetic
/// databases"), constant 0.99: item 0 is the most popular.
#[derive(Debug, Clone)]
pub struct Zipf {
    n: u64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
}

/// YCSB's default zipfian constant.
pub const ZIPF_THETA: f64 = 0.99;

impl Zipf {
    /// Over `0..n` (n ≥ 1). Computing zeta(n) is O(n): done once per benchmark.
    pub fn new(n: u64) -> Self {
        let n = n.max(1);
        let theta = ZIPF_THETA;
        let zetan: f64 = (1..=n).map(|i| 1.0 / (i as f64).powf(theta)).sum();
        let zeta2 = 1.0 + 0.5f64.powf(theta);
        let eta = (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan);
        Zipf {
            n,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta,
        }
    }

    /// An item in `0..n`.
    pub fn next(&self, rng: &mut Rng) -> u64 {
        let u = rng.unit();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1.min(self.n - 1);
        }
        let v = (self.n as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        v.min(self.n - 1)
    }
}

/// FNV-1a of a number: YCSB's scrambled zipfian spreads the popular items over the key space.
pub fn fnv64(v: u64) -> u64 {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for b in v.to_le_bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01B3);
    }
    h
}

/// How YCSB workloads pick existing keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Distribution {
    /// Every key equally likely.
    Uniform,
    /// Scrambled zipfian (0.99): a few hot keys spread over the key space.
    Zipfian,
    /// Zipfian over recency: the most recently inserted keys are the hottest.
    Latest,
}

/// Picks keys among `count` existing ones.
#[derive(Debug, Clone)]
pub struct Chooser {
    dist: Distribution,
    zipf: Option<Zipf>,
}

impl Chooser {
    /// A chooser over about `n` keys.
    pub fn new(dist: Distribution, n: u64) -> Self {
        let zipf = (dist != Distribution::Uniform).then(|| Zipf::new(n));
        Chooser { dist, zipf }
    }

    /// A key among `0..count`.
    pub fn pick(&self, rng: &mut Rng, count: u64) -> u64 {
        let count = count.max(1);
        match (&self.dist, &self.zipf) {
            (Distribution::Zipfian, Some(z)) => fnv64(z.next(rng)) % count,
            (Distribution::Latest, Some(z)) => count - 1 - z.next(rng).min(count - 1),
            _ => rng.below(count),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_numerically_and_missing_keys_differ() {
        let k = Keys::new(16);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        k.fill(9, &mut a);
        k.fill(10, &mut b);
        assert_eq!(a, b"0000000000000009");
        assert!(a < b);
        k.fill_missing(9, &mut b);
        assert_eq!(b, b"0000000000000009.");
        let k = Keys::new(2);
        k.fill(12345, &mut a);
        assert_eq!(
            a, b"12345",
            "too long for the size: longer, never truncated"
        );
        assert_eq!(Keys::digits(0), 1);
        assert_eq!(Keys::digits(999), 3);
        assert_eq!(Keys::digits(1000), 4);
    }

    #[test]
    fn zipf_is_skewed_and_in_range() {
        let z = Zipf::new(1000);
        let mut rng = Rng::new(1);
        let mut hist = vec![0u32; 1000];
        for _ in 0..100_000 {
            hist[z.next(&mut rng) as usize] += 1;
        }
        assert!(
            hist[0] > hist[10] && hist[10] > hist[500],
            "{:?}",
            &hist[..12]
        );
        let c = Chooser::new(Distribution::Latest, 1000);
        for _ in 0..1000 {
            assert!(c.pick(&mut rng, 1000) < 1000);
        }
        let c = Chooser::new(Distribution::Zipfian, 10);
        for _ in 0..1000 {
            assert!(c.pick(&mut rng, 10) < 10);
        }
        assert_eq!(Zipf::new(1).next(&mut rng), 0);
    }

    #[test]
    fn values_have_the_size() {
        let v = Values::new(100, 3);
        let mut rng = Rng::new(2);
        assert_eq!(v.get(&mut rng).len(), 100);
        let v = Values::new(3 << 20, 3);
        assert_eq!(v.get(&mut rng).len(), 3 << 20);
    }
}
