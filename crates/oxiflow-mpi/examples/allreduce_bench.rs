//! The bare `MPI_Allreduce` of `make bench-mpi` (bench/mpi_allreduce.jl compares Oxiflow's
//! `mpi_allreduce` with it on the same ranks): a sum of `n` Float64 (argument 1, default
//! 12,500,000 = 100 MB), blocking (`MPI_Allreduce`), as a C program would call it, and
//! non-blocking (`MPI_Iallreduce` then `MPI_Wait`, the call Oxiflow's op makes; OpenMPI runs
//! the two with different algorithms), each with buffers from `vec!` and with buffers
//! allocated as Oxiflow allocates tensors (`oxiflow_core::strided::buffer_for`, which asks
//! for transparent huge pages on large buffers: OpenMPI's shared-memory copy of them ran
//! twice as fast on the project's VM); prints the median of 10 runs after 2 warm-ups of
//! each on rank 0. Run: mpirun -np 2 target/release/examples/allreduce_bench
use mpi::collective::SystemOperation;
use mpi::traits::*;
use std::time::Instant;

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(12_500_000);
    let universe = mpi::initialize().expect("MPI initializes");
    let world = universe.world();
    let ranks = world.size() as f64;
    let want = ranks + ranks * (ranks - 1.0) / 2.0;
    for (blocking, oxiflow_alloc) in [(true, false), (false, false), (true, true), (false, true)] {
        let fill = |v: f64| {
            let mut b = if oxiflow_alloc { oxiflow_core::strided::buffer_for::<f64>(n) } else { Vec::with_capacity(n) };
            b.resize(n, v);
            b
        };
        let (send, mut recv) = (fill(1.0 + world.rank() as f64), fill(0.0));
        let mut times = Vec::new();
        for k in 0..12 {
            recv.fill(0.0);
            world.barrier();
            let t = Instant::now();
            if blocking {
                world.all_reduce_into(&send[..], &mut recv[..], SystemOperation::sum());
            } else {
                mpi::request::scope(|scope| world.immediate_all_reduce_into(scope, &send[..], &mut recv[..], SystemOperation::sum()).wait());
            }
            if k >= 2 {
                times.push(t.elapsed().as_secs_f64());
            }
            assert!(recv.iter().all(|&v| v == want), "the sum is wrong");
        }
        times.sort_by(f64::total_cmp);
        if world.rank() == 0 {
            println!(
                "bare {}, {} buffers, {} ranks, {:.0} MB Float64: {:.2} ms (median of {})",
                if blocking { "MPI_Allreduce" } else { "MPI_Iallreduce + MPI_Wait" },
                if oxiflow_alloc { "Oxiflow's" } else { "vec!" },
                world.size(),
                n as f64 * 8e-6,
                times[times.len() / 2] * 1e3,
                times.len()
            );
        }
    }
}
