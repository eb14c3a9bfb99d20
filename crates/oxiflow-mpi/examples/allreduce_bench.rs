//! The bare `MPI_Allreduce` of `make bench-mpi` (bench/mpi_allreduce.jl compares Oxiflow's
//! `mpi_allreduce` with it on the same ranks): a sum of `n` Float64 (argument 1, default
//! 12,500,000 = 100 MB), blocking, as a C program would call it; prints the median of 10
//! runs after 2 warm-ups on rank 0. Run: mpirun -np 2 target/release/examples/allreduce_bench
use mpi::collective::SystemOperation;
use mpi::traits::*;
use std::time::Instant;

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(12_500_000);
    let universe = mpi::initialize().expect("MPI initializes");
    let world = universe.world();
    let send = vec![1.0f64 + world.rank() as f64; n];
    let mut recv = vec![0.0f64; n];
    let mut times = Vec::new();
    for k in 0..12 {
        world.barrier();
        let t = Instant::now();
        world.all_reduce_into(&send[..], &mut recv[..], SystemOperation::sum());
        if k >= 2 {
            times.push(t.elapsed().as_secs_f64());
        }
    }
    let ranks = world.size() as f64;
    assert_eq!(recv[n - 1], ranks + ranks * (ranks - 1.0) / 2.0);
    times.sort_by(f64::total_cmp);
    if world.rank() == 0 {
        println!(
            "bare MPI_Allreduce, {} ranks, {:.0} MB Float64: {:.2} ms (median of {})",
            world.size(),
            n as f64 * 8e-6,
            times[times.len() / 2] * 1e3,
            times.len()
        );
    }
}
