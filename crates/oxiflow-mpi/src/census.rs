//! The stall census: when an MPI wait times out, the ranks stuck in one tell each other
//! where they wait, so the error names the ranks that never joined.
//!
//! Horovod's stall inspector names the ranks that have not submitted a tensor, from the
//! readiness messages its coordinator collects for every collective. Oxiflow's collectives
//! have no coordinator (every rank issues them in one order and checks that with an
//! agreement all-reduce), and a non-blocking `MPI_Iallreduce` cannot say which ranks are
//! missing. So the census runs only after a wait has timed out, and costs nothing while the
//! job is healthy:
//!
//! 1. the timed-out rank sends a fixed-size report (its rank and the op it waits in) to every
//!    other rank, on its own duplicate of `MPI_COMM_WORLD` (so reports never meet the job's
//!    messages), and posts a receive for every other rank's report;
//! 2. it polls for the grace period ([`grace`]: the timeout, at most 10 s), or until every
//!    other rank has reported;
//! 3. ranks that reported wait in a collective or a point-to-point op too (the report says
//!    which); ranks that did not are missing: they run other work, wait in something that is
//!    not an Oxiflow MPI op, hang, or died.
//!
//! Ranks time out at different moments. A report arrives whenever its sender times out,
//! and the receiver sees it if it is still polling then; a rank that times out more than
//! the grace period after this one is named missing here (the later rank sees this one's
//! report, which has been waiting for it). Unanswered sends and receives are left to MPI,
//! like the timed-out request itself. The census runs once per process: after a timeout
//! MPI is unusable (a started collective cannot be cancelled) and the job should end.

use crate::transport::SharedComm;
use mpi::request::{Request, StaticScope};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Bytes of one report: the sender's rank (8 bytes, little-endian), then the op it waits in
/// as UTF-8, zero-padded (truncated to fit).
const REPORT: usize = 256;
/// The census's tag on its own communicator.
const TAG: i32 = 1;

/// A report not received yet: its sender, the leaked buffer it lands in, the receive.
type Pending = (usize, *mut [u8], Request<'static, [u8], StaticScope>);

/// The census's communicator and whether it has run in this process.
pub(crate) struct Census {
    /// Never freed: the collectives' communicator that holds the census may outlive
    /// `MPI_Finalize` (a session still holding it), and `MPI_Comm_free` after it aborts the
    /// process; MPI frees it at finalization.
    comm: ManuallyDrop<SharedComm>,
    ran: AtomicBool,
}

/// What the census found, seen from one rank.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Finding {
    /// Other ranks that reported, with the op each waits in, by rank.
    pub waiting: Vec<(usize, String)>,
    /// Other ranks that did not report within the grace period, ascending.
    pub missing: Vec<usize>,
}

/// How long a census waits for the other ranks' reports: the MPI timeout, at most 10 s.
pub(crate) fn grace(timeout: Duration) -> Duration {
    timeout.min(Duration::from_secs(10))
}

fn encode(rank: usize, what: &str) -> Vec<u8> {
    let mut r = vec![0u8; REPORT];
    r[..8].copy_from_slice(&(rank as u64).to_le_bytes());
    let mut end = what.len().min(REPORT - 8);
    while !what.is_char_boundary(end) {
        end -= 1;
    }
    r[8..8 + end].copy_from_slice(&what.as_bytes()[..end]);
    r
}

fn decode(r: &[u8]) -> (usize, String) {
    let rank = u64::from_le_bytes(r[..8].try_into().expect("8 bytes")) as usize;
    let text = &r[8..];
    let len = text.iter().position(|&b| b == 0).unwrap_or(text.len());
    (rank, String::from_utf8_lossy(&text[..len]).into_owned())
}

impl Census {
    /// A census on a duplicate of `world` (collective: every rank calls it, from `init`).
    pub(crate) fn new(world: &SimpleCommunicator) -> Self {
        Census { comm: ManuallyDrop::new(SharedComm(world.duplicate())), ran: AtomicBool::new(false) }
    }

    /// Runs the census from rank `rank` of `size`, which waits in `what`: `None` when it
    /// already ran in this process. Returns within about `grace`.
    pub(crate) fn run(&self, rank: usize, size: usize, what: &str, grace: Duration) -> Option<Finding> {
        if self.ran.swap(true, Ordering::SeqCst) {
            return None;
        }
        let report: &'static [u8] = Box::leak(encode(rank, what).into_boxed_slice());
        let others: Vec<usize> = (0..size).filter(|&r| r != rank).collect();
        // The sends are left to MPI whether or not they complete (a missing rank never
        // receives them); their buffer is one leaked report.
        for &r in &others {
            std::mem::forget(self.comm.0.process_at_rank(r as i32).immediate_send_with_tag(StaticScope, report, TAG));
        }
        let mut pending: Vec<Pending> = others
            .iter()
            .map(|&r| {
                // leaked: a receive that never completes keeps it for MPI
                let ptr: *mut [u8] = Box::into_raw(vec![0u8; REPORT].into_boxed_slice());
                // SAFETY: the buffer is never freed, and read through `ptr` only after the
                // receive (the only user of this borrow) has completed.
                let buf: &'static mut [u8] = unsafe { &mut *ptr };
                (r, ptr, self.comm.0.process_at_rank(r as i32).immediate_receive_into_with_tag(StaticScope, buf, TAG))
            })
            .collect();
        let mut finding = Finding::default();
        let start = Instant::now();
        loop {
            let mut still = Vec::with_capacity(pending.len());
            for (r, buf, req) in pending {
                match req.test() {
                    Ok(_) => {
                        // SAFETY: the receive completed, so MPI no longer writes the leaked
                        // buffer; nothing else refers to it.
                        let (_, op) = decode(unsafe { &*buf });
                        finding.waiting.push((r, op));
                    }
                    Err(req) => still.push((r, buf, req)),
                }
            }
            pending = still;
            if pending.is_empty() || start.elapsed() >= grace {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        finding.missing = pending
            .into_iter()
            .map(|(r, _, req)| {
                std::mem::forget(req);
                r
            })
            .collect();
        finding.waiting.sort();
        Some(finding)
    }
}

/// The census's part of a timeout error: the missing ranks, then where the others wait.
pub(crate) fn describe(f: &Finding, grace: Duration) -> String {
    let mut s = String::new();
    if f.missing.is_empty() {
        s.push_str("every other rank is waiting in an MPI op too");
    } else {
        s.push_str(&format!(
            "rank(s) {:?} never joined (they did not report within {:.0} s of this rank's timeout: they run other work, wait outside Oxiflow's MPI ops, hang or died)",
            f.missing,
            grace.as_secs_f64()
        ));
    }
    // group the reporting ranks by the op they wait in, in rank order of first appearance
    let mut groups: Vec<(&str, Vec<usize>)> = Vec::new();
    for (r, op) in &f.waiting {
        match groups.iter_mut().find(|(o, _)| *o == op.as_str()) {
            Some((_, rs)) => rs.push(*r),
            None => groups.push((op.as_str(), vec![*r])),
        }
    }
    for (op, rs) in groups {
        s.push_str(&format!("; rank(s) {rs:?} wait in {op}"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_carries_the_rank_and_the_op_and_truncates_on_a_character_boundary() {
        assert_eq!(decode(&encode(3, "MpiAllreduce 'grads'")), (3, "MpiAllreduce 'grads'".to_string()));
        let long = "é".repeat(200); // 400 bytes, 2 per character
        let (r, op) = decode(&encode(7, &long));
        assert_eq!(r, 7);
        assert_eq!(op, "é".repeat(124)); // 248 bytes fit, an even number
    }

    #[test]
    fn the_description_names_missing_ranks_and_groups_the_waiting_ones_by_op() {
        let f = Finding { waiting: vec![(1, "MpiAllreduce 'g'".into()), (2, "MpiRecv 'h'".into()), (3, "MpiAllreduce 'g'".into())], missing: vec![4, 5] };
        assert_eq!(
            describe(&f, Duration::from_secs(3)),
            "rank(s) [4, 5] never joined (they did not report within 3 s of this rank's timeout: they run other work, wait outside Oxiflow's MPI ops, hang or died); rank(s) [1, 3] wait in MpiAllreduce 'g'; rank(s) [2] wait in MpiRecv 'h'"
        );
        let none = Finding { waiting: vec![(0, "MpiBcast 'b'".into())], missing: vec![] };
        assert_eq!(describe(&none, Duration::from_secs(3)), "every other rank is waiting in an MPI op too; rank(s) [0] wait in MpiBcast 'b'");
    }

    #[test]
    fn the_grace_period_is_the_timeout_capped_at_ten_seconds() {
        assert_eq!(grace(Duration::from_secs(3)), Duration::from_secs(3));
        assert_eq!(grace(Duration::from_secs(60)), Duration::from_secs(10));
    }
}
