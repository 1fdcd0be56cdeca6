//! Library operations recorded into graphs (`Graph::record`): recorded once, replayed
//! with new inputs, every output checked after every replay; and the operations that
//! cannot be recorded refuse with an error that leaves the graph and the buffers as
//! they were.

use crate::common::{devices, seed, slow};
use dotcompute::{Device, Error, Graph};
use dotcompute_ops::histogram::histogram_even;
use dotcompute_ops::reduce::{reduce_into, reduce_rows};
use dotcompute_ops::scan::exclusive_sum;
use dotcompute_ops::select::copy_if;
use dotcompute_ops::softmax::softmax_rows;
use dotcompute_ops::sort::sort_pairs;
use dotcompute_ops::transpose::transpose;
use dotcompute_ops::{Order, ReduceOp};

const BINS: u32 = 64;
const KEY_RANGE: u32 = 1024;

/// The recorded pipeline's outputs after one replay, read through the graph.
struct Outputs {
    keys: Vec<u32>,
    values: Vec<u32>,
    sums: Vec<u32>,
    hist: Vec<u32>,
    total: Vec<u32>,
    transposed: Vec<u32>,
    row_sums: Vec<u32>,
    softmax: Vec<f32>,
}

/// Checks `got` against plain-Rust references for inputs `keys` (values `0..n`), the
/// `rows × cols` matrix `m` and the softmax input `x`.
fn check(got: &Outputs, keys: &[u32], m: &[u32], x: &[f32], cols: usize, what: &str) {
    let mut pairs: Vec<(u32, u32)> = keys.iter().copied().zip(0..).collect();
    pairs.sort_by_key(|p| p.0); // stable, as the sort is
    let sorted: Vec<u32> = pairs.iter().map(|p| p.0).collect();
    assert_eq!(got.keys, sorted, "{what}: keys");
    let values: Vec<u32> = pairs.iter().map(|p| p.1).collect();
    assert_eq!(got.values, values, "{what}: values");
    let mut acc = 0u32;
    let sums: Vec<u32> = sorted
        .iter()
        .map(|&k| {
            let s = acc;
            acc = acc.wrapping_add(k);
            s
        })
        .collect();
    assert_eq!(got.sums, sums, "{what}: exclusive sums");
    assert_eq!(got.total, [acc], "{what}: total");
    let mut hist = vec![0u32; BINS as usize];
    for &k in &sorted {
        hist[(k / (KEY_RANGE / BINS)) as usize] += 1;
    }
    assert_eq!(got.hist, hist, "{what}: histogram");
    let rows = m.len() / cols;
    let transposed = (0..m.len()).all(|k| got.transposed[(k % cols) * rows + k / cols] == m[k]);
    assert!(transposed, "{what}: transpose of {rows} x {cols}");
    let row_sums: Vec<u32> = m.chunks(cols).map(|r| r.iter().sum()).collect();
    assert_eq!(got.row_sums, row_sums, "{what}: row sums");
    for (r, (row, out)) in x.chunks(cols).zip(got.softmax.chunks(cols)).enumerate() {
        let top = row.iter().fold(f64::NEG_INFINITY, |a, &v| a.max(v as f64));
        let sum: f64 = row.iter().map(|&v| (v as f64 - top).exp()).sum();
        for (c, (&v, &g)) in row.iter().zip(out).enumerate() {
            let want = (v as f64 - top).exp() / sum;
            assert!(
                (g as f64 - want).abs() <= 2e-5 * want + 1e-30,
                "{what}: softmax [{r}][{c}] = {g}, want {want}"
            );
        }
    }
}

/// Sorting pairs, an exclusive sum, a histogram and a total of the sorted keys, recorded
/// as one recording; a transpose and the row sums of a matrix in a second recording
/// after it, and row softmaxes in a third with no dependency. The graph is instantiated
/// once and replayed three times (on the device, then on a stream) with new random
/// inputs written through its handles and every output poisoned first.
#[test]
fn recorded_operations_replay_with_new_inputs_on_every_backend() {
    let seed = seed();
    for d in devices() {
        let sizes: &[usize] = if slow(&d) {
            &[1, 2, 4099, 10_007]
        } else {
            &[1, 4099, 10_007, (1 << 20) + 3]
        };
        for &n in sizes {
            replay_pipeline(&d, n, seed ^ n as u64);
        }
    }
}

fn replay_pipeline(d: &Device, n: usize, seed: u64) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let cols = 1 + rng.usize(..n.min(300));
    let rows = 1 + n / cols;
    let mut keys = d.alloc_filled(n, 0u32).unwrap();
    let mut values = d.alloc_filled(n, 0u32).unwrap();
    let mut sums = d.alloc_filled(n, 0u32).unwrap();
    let mut hist = d.alloc_filled(BINS as usize, 0u32).unwrap();
    let mut total = d.alloc_filled(1, 0u32).unwrap();
    let mut m = d.alloc_filled(rows * cols, 0u32).unwrap();
    let mut transposed = d.alloc_filled(rows * cols, 0u32).unwrap();
    let mut row_sums = d.alloc_filled(rows, 0u32).unwrap();
    let mut x = d.alloc_filled(rows * cols, 0.0f32).unwrap();
    let mut y = d.alloc_filled(rows * cols, 0.0f32).unwrap();
    let mut graph = Graph::new(d);
    let first = graph
        .record(
            (&mut keys, &mut values, &mut sums, (&mut hist, &mut total)),
            &[],
            |q, (k, v, s, (h, t))| {
                sort_pairs(q, k, v, Order::Ascending)?;
                exclusive_sum(q, k, s)?;
                histogram_even(q, k, BINS, 0, KEY_RANGE, h)?;
                reduce_into(q, k, ReduceOp::Sum, t)
            },
        )
        .unwrap();
    let (gk, gv, gs, (gh, gt)) = first.buffers;
    let second = graph
        .record(
            (&mut m, &mut transposed, &mut row_sums),
            &first.done,
            |q, (m, mt, r)| {
                transpose(q, m, rows, cols, mt)?;
                reduce_rows(q, m, cols, ReduceOp::Sum, r)
            },
        )
        .unwrap();
    let (gm, gmt, gr) = second.buffers;
    let third = graph
        .record((&mut x, &mut y), &[], |q, (x, y)| {
            softmax_rows(q, x, cols, y)
        })
        .unwrap();
    let (gx, gy) = third.buffers;
    let mut exec = graph.instantiate().unwrap();
    let stream = d.stream().unwrap();
    for replay in 0..3 {
        let what = format!(
            "{} n {n} ({rows} x {cols}) replay {replay} seed {seed}",
            d.label()
        );
        let k: Vec<u32> = (0..n).map(|_| rng.u32(..KEY_RANGE)).collect();
        let mv: Vec<u32> = (0..rows * cols).map(|_| rng.u32(..1 << 20)).collect();
        let xv: Vec<f32> = (0..rows * cols).map(|_| rng.f32() * 40.0 - 20.0).collect();
        exec.write(gk, &k).unwrap();
        exec.write(gv, &(0..n as u32).collect::<Vec<_>>()).unwrap();
        exec.write(gm, &mv).unwrap();
        exec.write(gx, &xv).unwrap();
        exec.fill(gs, 0xDEAD_BEEF).unwrap();
        exec.fill(gh, 0xDEAD_BEEF).unwrap();
        exec.fill(gt, 0xDEAD_BEEF).unwrap();
        exec.fill(gmt, 0xDEAD_BEEF).unwrap();
        exec.fill(gr, 0xDEAD_BEEF).unwrap();
        exec.fill(gy, f32::NAN).unwrap();
        if replay == 2 {
            exec.launch(&stream).unwrap();
        } else {
            exec.launch(d).unwrap();
        }
        let got = Outputs {
            keys: exec.read(gk).unwrap(),
            values: exec.read(gv).unwrap(),
            sums: exec.read(gs).unwrap(),
            hist: exec.read(gh).unwrap(),
            total: exec.read(gt).unwrap(),
            transposed: exec.read(gmt).unwrap(),
            row_sums: exec.read(gr).unwrap(),
            softmax: exec.read(gy).unwrap(),
        };
        check(&got, &k, &mv, &xv, cols, &what);
    }
    drop(exec);
    // The buffers are the caller's again, with the last replay's results.
    assert!(keys.to_vec().unwrap().is_sorted(), "{}", d.label());
}

/// An operation that needs a value on the host (copy-if returns its count) cannot be
/// recorded: the recording fails with `Error::Graph`, the graph gains nothing, and the
/// lent buffers are usable again once the graph is gone.
#[test]
fn an_operation_that_reads_to_the_host_is_refused_and_the_graph_gains_nothing() {
    for d in devices() {
        let input = d.upload(&[5u32, 6, 7, 8]).unwrap();
        let flags = d.upload(&[1u32, 0, 1, 0]).unwrap();
        let mut out = d.alloc_filled(4, 0u32).unwrap();
        let mut sorted = d.upload(&[3u32, 1, 2]).unwrap();
        let mut graph = Graph::new(&d);
        let refused = graph.record((&input, &flags, &mut out), &[], |q, (i, f, o)| {
            copy_if(q, i, f, o)
        });
        assert!(
            matches!(refused, Err(Error::Graph { .. })),
            "{}: {refused:?}",
            d.label()
        );
        // The graph still works, with only what was recorded after.
        let recorded = graph
            .record(&mut sorted, &[], |q, k| {
                dotcompute_ops::sort::sort_keys(q, k, Order::Descending)
            })
            .unwrap();
        let mut exec = graph.instantiate().unwrap();
        exec.launch(&d).unwrap();
        assert_eq!(
            exec.read(recorded.buffers).unwrap(),
            [3, 2, 1],
            "{}",
            d.label()
        );
        drop(exec);
        // The refused copy-if's kernels (launched before it asked for its count) are not
        // in the graph: the replay left `out` as it was. And it is usable again.
        assert_eq!(out.to_vec().unwrap(), [0, 0, 0, 0], "{}", d.label());
        assert_eq!(
            copy_if(&d, &input, &flags, &mut out).unwrap(),
            2,
            "{}",
            d.label()
        );
        assert_eq!(out.to_vec().unwrap()[..2], [5, 7], "{}", d.label());
    }
}

/// An operation on a `u32` input writing a `u32` output, run on any queue.
trait Op {
    fn out_len(&self, n: usize) -> usize {
        n
    }
    fn run<Q: dotcompute::AsStream>(
        &self,
        q: &Q,
        input: &dotcompute::Buffer<u32>,
        out: &mut dotcompute::Buffer<u32>,
    ) -> dotcompute::Result<()>;
}

macro_rules! op {
    ($name:ident, $len:expr, |$q:ident, $i:ident, $o:ident| $body:expr) => {
        struct $name;
        impl Op for $name {
            fn out_len(&self, n: usize) -> usize {
                let len: fn(usize) -> usize = $len;
                len(n)
            }
            fn run<Q: dotcompute::AsStream>(
                &self,
                $q: &Q,
                $i: &dotcompute::Buffer<u32>,
                $o: &mut dotcompute::Buffer<u32>,
            ) -> dotcompute::Result<()> {
                $body
            }
        }
    };
}

/// Rows of the test matrices (the input's length is a multiple).
const ROWS: usize = 7;
/// `k` of the top-k case.
const K: usize = 100;

op!(ReduceMax, |_| 1, |q, i, o| reduce_into(
    q,
    i,
    ReduceOp::Max,
    o
));
op!(RowSums, |n| n / ROWS, |q, i, o| reduce_rows(
    q,
    i,
    ROWS,
    ReduceOp::Sum,
    o
));
op!(ExclusiveMax, |n| n, |q, i, o| {
    dotcompute_ops::scan::exclusive_scan(q, i, o, ReduceOp::Max)
});
op!(InclusiveSum, |n| n, |q, i, o| {
    dotcompute_ops::scan::inclusive_sum(q, i, o)
});
op!(SumsByHeads, |n| n, |q, i, o| {
    // The heads, a constant of the graph (`scratch_from`).
    let heads: Vec<u32> = (0..i.len()).map(|j| u32::from(j % 5 == 0)).collect();
    let heads = q.scratch_from(&heads)?;
    dotcompute_ops::scan::scan_by_heads(q, i, &heads, o, ReduceOp::Sum, true)
});
op!(SortDescending, |n| n, |q, i, o| {
    q.copy_buffer(i, o)?;
    dotcompute_ops::sort::sort_keys(q, o, Order::Descending)
});
op!(SortByLowBits, |n| n, |q, i, o| {
    q.copy_buffer(i, o)?;
    let mut positions = q.scratch::<u32>(i.len())?;
    q.copy_buffer(i, &mut positions)?;
    dotcompute_ops::sort::sort_pairs_by_bits(q, o, &mut positions, Order::Ascending, 0..12)
});
op!(Histogram, |_| 64, |q, i, o| histogram_even(
    q,
    i,
    64,
    0,
    1 << 20,
    o
));
op!(BinIndices, |n| n, |q, i, o| {
    dotcompute_ops::histogram::bin_indices_even(q, i, 50, 1000, 900_000, o)
});
op!(TopK, |_| K, |q, i, o| {
    let mut indices = q.scratch::<u32>(K)?;
    dotcompute_ops::topk::top_k(q, i, Order::Descending, o, &mut indices)
});
op!(Transpose, |n| n, |q, i, o| transpose(
    q,
    i,
    ROWS,
    i.len() / ROWS,
    o
));

/// Each operation that returns nothing to the host, recorded into a graph and replayed
/// twice (with the output poisoned before each), gives exactly what it gives run
/// directly (on the CPU device the recording runs the kernels where a direct run takes
/// the host path: the two paths are checked against each other there too).
#[test]
fn every_recordable_operation_gives_its_direct_result() {
    let seed = seed();
    for d in devices() {
        let sizes: &[usize] = if slow(&d) {
            &[ROWS * 1429]
        } else {
            &[ROWS * 1429, ROWS * 149_797]
        };
        for &n in sizes {
            let mut rng = fastrand::Rng::with_seed(seed ^ n as u64);
            let input: Vec<u32> = (0..n).map(|_| rng.u32(..1 << 20)).collect();
            let what = format!("{} n {n} seed {seed}", d.label());
            same_recorded(&d, &input, ReduceMax, &format!("{what} reduce max"));
            same_recorded(&d, &input, RowSums, &format!("{what} row sums"));
            same_recorded(&d, &input, ExclusiveMax, &format!("{what} exclusive max"));
            same_recorded(&d, &input, InclusiveSum, &format!("{what} inclusive sum"));
            same_recorded(&d, &input, SumsByHeads, &format!("{what} sums by heads"));
            same_recorded(&d, &input, SortDescending, &format!("{what} sort"));
            same_recorded(&d, &input, SortByLowBits, &format!("{what} sort by bits"));
            same_recorded(&d, &input, Histogram, &format!("{what} histogram"));
            same_recorded(&d, &input, BinIndices, &format!("{what} bin indices"));
            same_recorded(&d, &input, TopK, &format!("{what} top-k"));
            same_recorded(&d, &input, Transpose, &format!("{what} transpose"));
        }
    }
}

fn same_recorded(d: &Device, input: &[u32], op: impl Op, what: &str) {
    let x = d.upload(input).unwrap();
    let len = op.out_len(input.len());
    let mut direct = d.alloc_filled(len, 0xDEAD_BEEFu32).unwrap();
    op.run(d, &x, &mut direct).unwrap();
    let direct = direct.to_vec().unwrap();
    let mut out = d.alloc_filled(len, 0u32).unwrap();
    let mut graph = Graph::new(d);
    let recorded = graph
        .record((&x, &mut out), &[], |q, (x, o)| op.run(q, x, o))
        .unwrap();
    let (_, gout) = recorded.buffers;
    let mut exec = graph.instantiate().unwrap();
    for replay in 0..2 {
        exec.fill(gout, 0xDEAD_BEEF).unwrap();
        exec.launch(d).unwrap();
        let got = exec.read(gout).unwrap();
        if let Some(i) = (0..len).find(|&i| got[i] != direct[i]) {
            panic!(
                "{what}, replay {replay}: [{i}] = {} recorded, {} direct",
                got[i], direct[i]
            );
        }
    }
}
