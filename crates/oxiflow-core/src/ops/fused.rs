//! `_FusedElementwise`: one CPU step that evaluates a cluster of elementwise float ops
//! (`Sin`, `Mul`, `Tanh`, `AddN`, ...) of one shape, tile by tile, without materializing
//! the tensors between them (the loop fusion of XLA's CPU backend and Grappler's
//! `_UnaryOpsComposition`, generalized to DAGs of unary, binary and n-ary ops).
//!
//! The graph pass that finds the clusters is [`crate::fusion`]; it describes each one as a
//! [`Program`] built with [`ProgramBuilder`]: the cluster's external inputs, its constants,
//! one instruction per op, and which values leave the cluster. Running it walks the
//! elements in tiles (sized so the tile registers stay in the L2 cache) and applies each
//! instruction to a whole tile, so the SIMD kernels of [`vmath`] still see long slices; large
//! tensors are split over the intra-op pool, one register file per thread.
//!
//! Every instruction uses the same scalar or slice function as the op's own kernel
//! (`f64::abs`, `vmath::Fun::Sin`, `maximum` ...), so a fused run gives the same bits as an
//! unfused one (tested in `fusion.rs`). A comparison's Bool value is a mask of 1s and 0s in
//! the program's float type; Bool inputs are read as masks, Bool outputs written from them.
//! The op exists only in plans (no graph node has it; it is not in the op registry) and
//! only on CPU devices: the pass leaves GPU subgraphs unfused, as it has no GPU kernel.

pub(crate) use super::fused_apply::FusedFloat;
use super::fused_apply::{apply1, apply2, mask, pow_by, select};
use super::fused_broadcast::{Lines, OtherOrder, Spread, Vector};
use super::vmath;
use super::*;
use crate::intra_op;
use ndarray::{ArcArray, IxDyn, ShapeBuilder};
use std::mem::MaybeUninit;
use std::sync::Arc;

/// Unary functions of the instruction set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fn1 {
    /// `AddN` of one input.
    Identity,
    /// `BroadcastTo` of one element (the gradient of a `sum`): a copy, whose result is in
    /// column-major order as the op's own kernel writes it ([`memory_orders`]).
    Splat,
    Neg,
    Square,
    Abs,
    Floor,
    /// One of [`vmath`]'s slice functions (`Exp`, `Log`, `Tanh`, `Sigmoid`, `Sqrt`, `Relu`,
    /// `Sin`, `Cos`, `Tan`).
    V(vmath::Fun),
}

/// Binary functions of the instruction set (equal-length operands).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fn2 {
    Add,
    Sub,
    Mul,
    Div,
    Max,
    Min,
    Pow,
    /// `TanhGrad(y, dy)`.
    TanhGrad,
    /// `SigmoidGrad(y, dy)`.
    SigmoidGrad,
    /// `ReluGrad(dy, y)`.
    ReluGrad,
    /// `Greater`, `GreaterEqual`, `Less`, `LessEqual`, `Equal`: a mask, 1 where the
    /// comparison holds and 0 elsewhere (a `Bool` value kept in the cluster's float type).
    Gt,
    Ge,
    Lt,
    Le,
    Eq,
}

/// Where an instruction reads an operand: a register, or a full-size external input at the
/// current tile's offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Operand {
    Reg(u32),
    In(u32),
}

/// One step of a program: `dst = f(x)`, `dst = f(a, b)` or `SelectV2`'s `dst = c ? x : y`
/// (`x` where the mask `c` is nonzero) over a tile; then, when `out` is set, the tile of
/// `dst` is stored into that output.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Instr {
    Un { f: Fn1, x: Operand, dst: u32, out: Option<u32> },
    Bin { f: Fn2, a: Operand, b: Operand, dst: u32, out: Option<u32> },
    Sel { c: Operand, x: Operand, y: Operand, dst: u32, out: Option<u32> },
}

/// A fused cluster, ready to run: built by [`ProgramBuilder::finish`].
#[derive(Debug)]
pub struct Program {
    /// Element count of every tensor in the cluster (inputs are this size or one element).
    pub len: usize,
    /// Number of external inputs (the step's inputs, in order).
    pub num_inputs: usize,
    /// What each input holds.
    inputs: Vec<InputKind>,
    /// Registers filled once per run and never overwritten: one-element inputs (input
    /// index) and constants (value).
    pinned_inputs: Vec<(u32, u32)>,
    pinned_consts: Vec<(u32, f64)>,
    code: Vec<Instr>,
    /// Outputs that are a pinned register itself (a constant or a broadcast input leaving
    /// the cluster), filled at the end of the run.
    pinned_outputs: Vec<(u32, u32)>,
    num_outputs: usize,
    num_regs: usize,
    /// `(node name, op type)` of each op the program replaces, in graph order (profiles
    /// list them under the fused step).
    pub replaced: Vec<(String, String)>,
}

/// An external input of a program: [`Program::len`] elements, one element (broadcast to
/// every element), or a row or column of the cluster's matrices ([`super::fused_broadcast`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum InputKind {
    Full,
    One,
    Vector(Vector),
}

/// A value while a program is being built (one per op output, input or constant).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Value(u32);

#[derive(Clone, Copy, Debug)]
enum Def {
    Input { index: u32, full: bool },
    Const(f64),
    Un(Fn1, Value),
    Bin(Fn2, Value, Value),
    Sel(Value, Value, Value),
}

impl Def {
    /// The values it reads.
    fn reads(&self) -> smallvec::SmallVec<[Value; 3]> {
        match *self {
            Def::Un(_, x) => smallvec::smallvec![x],
            Def::Bin(_, a, b) => smallvec::smallvec![a, b],
            Def::Sel(c, x, y) => smallvec::smallvec![c, x, y],
            Def::Input { .. } | Def::Const(_) => smallvec::SmallVec::new(),
        }
    }
}

/// Builds a [`Program`] in terms of [`Value`]s; [`ProgramBuilder::finish`] assigns
/// registers (a value's register is reused once its last reader has run).
#[derive(Debug, Default)]
pub(crate) struct ProgramBuilder {
    defs: Vec<Def>,
    outputs: Vec<Value>,
    num_inputs: u32,
    kinds: Vec<InputKind>,
    replaced: Vec<(String, String)>,
}

impl ProgramBuilder {
    /// The next external input, of `kind`.
    pub fn input(&mut self, kind: InputKind) -> Value {
        self.num_inputs += 1;
        self.kinds.push(kind);
        self.push(Def::Input { index: self.num_inputs - 1, full: kind != InputKind::One })
    }
    /// A constant (`OnesLike`, `ZerosLike`).
    pub fn constant(&mut self, v: f64) -> Value {
        self.push(Def::Const(v))
    }
    pub fn unary(&mut self, f: Fn1, x: Value) -> Value {
        self.push(Def::Un(f, x))
    }
    pub fn binary(&mut self, f: Fn2, a: Value, b: Value) -> Value {
        self.push(Def::Bin(f, a, b))
    }
    /// Makes `v` the program's next output.
    pub fn output(&mut self, v: Value) {
        self.outputs.push(v);
    }
    /// Records an op the program replaces (for profiles).
    pub fn replaces(&mut self, node: &str, op: &str) {
        self.replaced.push((node.to_string(), op.to_string()));
    }
    fn push(&mut self, d: Def) -> Value {
        self.defs.push(d);
        Value(self.defs.len() as u32 - 1)
    }

    /// The value the op `op` computes from `args` (values of its inputs, in order), or
    /// `None` when `op` is not one of the fusable ops ([`fusable`]) or takes another number
    /// of inputs. Each op lowers to the functions its kernel uses.
    pub fn lower(&mut self, op: &str, args: &[Value]) -> Option<Value> {
        let un = |f| (Some(f), None);
        let bin = |f| (None, Some(f));
        let (f1, f2) = match op {
            "Neg" => un(Fn1::Neg),
            "Square" => un(Fn1::Square),
            "Sin" => un(Fn1::V(vmath::Fun::Sin)),
            "Cos" => un(Fn1::V(vmath::Fun::Cos)),
            "Tan" => un(Fn1::V(vmath::Fun::Tan)),
            "Abs" => un(Fn1::Abs),
            "Floor" => un(Fn1::Floor),
            "Exp" => un(Fn1::V(vmath::Fun::Exp)),
            "Log" => un(Fn1::V(vmath::Fun::Log)),
            "Tanh" => un(Fn1::V(vmath::Fun::Tanh)),
            "Sigmoid" => un(Fn1::V(vmath::Fun::Sigmoid)),
            "Sqrt" => un(Fn1::V(vmath::Fun::Sqrt)),
            "Relu" => un(Fn1::V(vmath::Fun::Relu)),
            "Add" => bin(Fn2::Add),
            "Sub" => bin(Fn2::Sub),
            "Mul" => bin(Fn2::Mul),
            "RealDiv" => bin(Fn2::Div),
            "Maximum" => bin(Fn2::Max),
            "Minimum" => bin(Fn2::Min),
            "Pow" => bin(Fn2::Pow),
            "TanhGrad" => bin(Fn2::TanhGrad),
            "SigmoidGrad" => bin(Fn2::SigmoidGrad),
            "ReluGrad" => bin(Fn2::ReluGrad),
            "Greater" => bin(Fn2::Gt),
            "GreaterEqual" => bin(Fn2::Ge),
            "Less" => bin(Fn2::Lt),
            "LessEqual" => bin(Fn2::Le),
            "Equal" => bin(Fn2::Eq),
            "SelectV2" => {
                return match *args {
                    [c, x, y] => Some(self.push(Def::Sel(c, x, y))),
                    _ => None,
                }
            }
            "OnesLike" | "ZerosLike" if args.len() == 1 => return Some(self.constant(if op == "OnesLike" { 1.0 } else { 0.0 })),
            // (a cluster's inputs have its shape or one element: `BroadcastTo` of one element,
            // the gradient of a `sum`, is that element in every position, as its input is)
            "BroadcastTo" if args.len() == 1 => return Some(self.unary(Fn1::Splat, args[0])),
            // `AddN`'s kernel adds left to right: ((x0 + x1) + x2) + ...
            "AddN" => {
                let (&first, rest) = args.split_first()?;
                return Some(if rest.is_empty() { self.unary(Fn1::Identity, first) } else { rest.iter().fold(first, |acc, &x| self.binary(Fn2::Add, acc, x)) });
            }
            _ => return None,
        };
        match (f1, f2, args) {
            (Some(f), _, &[x]) => Some(self.unary(f, x)),
            (_, Some(f), &[a, b]) => Some(self.binary(f, a, b)),
            _ => None,
        }
    }

    /// Assigns registers and returns the program over `len` elements.
    pub fn finish(self, len: usize) -> Program {
        let n = self.defs.len();
        // last reader of each value (usize::MAX: an output, alive to the end)
        let mut last = vec![0usize; n];
        for (i, d) in self.defs.iter().enumerate() {
            for v in d.reads() {
                last[v.0 as usize] = i;
            }
        }
        let mut out_of = vec![None; n];
        for (k, v) in self.outputs.iter().enumerate() {
            out_of[v.0 as usize].get_or_insert(k as u32);
        }
        let mut p = Program {
            len,
            num_inputs: self.num_inputs as usize,
            inputs: self.kinds,
            pinned_inputs: Vec::new(),
            pinned_consts: Vec::new(),
            code: Vec::new(),
            pinned_outputs: Vec::new(),
            num_outputs: self.outputs.len(),
            num_regs: 0,
            replaced: self.replaced,
        };
        // Pinned registers (one-element inputs, constants) are filled once per run, before
        // any instruction: they come first and are never handed to another value.
        let mut pinned = vec![false; n];
        let mut loc: Vec<Operand> = self
            .defs
            .iter()
            .enumerate()
            .map(|(i, d)| match *d {
                Def::Input { index, full: true } => Operand::In(index),
                Def::Input { index, full: false } => {
                    pinned[i] = true;
                    p.num_regs += 1;
                    p.pinned_inputs.push((p.num_regs as u32 - 1, index));
                    Operand::Reg(p.num_regs as u32 - 1)
                }
                Def::Const(v) => {
                    pinned[i] = true;
                    p.num_regs += 1;
                    p.pinned_consts.push((p.num_regs as u32 - 1, v));
                    Operand::Reg(p.num_regs as u32 - 1)
                }
                // assigned below
                Def::Un(..) | Def::Bin(..) | Def::Sel(..) => Operand::Reg(u32::MAX),
            })
            .collect();
        let mut free: Vec<u32> = Vec::new();
        for (i, d) in self.defs.iter().enumerate() {
            let mut new_reg = |p: &mut Program| {
                free.pop().unwrap_or_else(|| {
                    p.num_regs += 1;
                    p.num_regs as u32 - 1
                })
            };
            let here = match *d {
                Def::Input { .. } | Def::Const(_) => continue,
                Def::Un(f, x) => {
                    // the operand is still live here, so the new register differs from it
                    let dst = new_reg(&mut p);
                    p.code.push(Instr::Un { f, x: loc[x.0 as usize], dst, out: out_of[i] });
                    Operand::Reg(dst)
                }
                Def::Bin(f, a, b) => {
                    let dst = new_reg(&mut p);
                    p.code.push(Instr::Bin { f, a: loc[a.0 as usize], b: loc[b.0 as usize], dst, out: out_of[i] });
                    Operand::Reg(dst)
                }
                Def::Sel(c, x, y) => {
                    let dst = new_reg(&mut p);
                    p.code.push(Instr::Sel { c: loc[c.0 as usize], x: loc[x.0 as usize], y: loc[y.0 as usize], dst, out: out_of[i] });
                    Operand::Reg(dst)
                }
            };
            loc[i] = here;
            // operands whose last reader this was give their registers back
            let mut freed: smallvec::SmallVec<[u32; 3]> = smallvec::SmallVec::new();
            for v in d.reads().iter().map(|v| v.0 as usize) {
                if last[v] == i && out_of[v].is_none() && !pinned[v] {
                    if let Operand::Reg(r) = loc[v] {
                        if !freed.contains(&r) {
                            freed.push(r);
                        }
                    }
                }
            }
            free.extend(freed);
            // a value nothing reads and no output needs (a dead op) frees its register at once
            // (a reader always comes after the value, so `last[i] <= i` means no reader)
            if out_of[i].is_none() && last[i] <= i {
                if let Operand::Reg(r) = here {
                    free.push(r);
                }
            }
        }
        // outputs that no instruction writes: constants and one-element inputs (pinned),
        // full inputs, and a value given as a second output
        for (k, v) in self.outputs.iter().enumerate() {
            let v = v.0 as usize;
            let written = matches!(self.defs[v], Def::Un(..) | Def::Bin(..) | Def::Sel(..)) && out_of[v] == Some(k as u32);
            match loc[v] {
                _ if written => {}
                Operand::Reg(r) if pinned[v] => p.pinned_outputs.push((k as u32, r)),
                // outputs are never freed, so the register still holds the value at the end
                x => {
                    p.num_regs += 1;
                    p.code.push(Instr::Un { f: Fn1::Identity, x, dst: p.num_regs as u32 - 1, out: Some(k as u32) });
                }
            }
        }
        p
    }
}

impl Program {
    /// Number of instructions.
    pub fn num_instrs(&self) -> usize {
        self.code.len()
    }
    /// Number of tile registers.
    pub fn num_regs(&self) -> usize {
        self.num_regs
    }
    /// Number of outputs.
    pub fn num_outputs(&self) -> usize {
        self.num_outputs
    }
}

/// Tile length for a program with `regs` registers: the registers of one tile fill about
/// 32 KiB (an L1 data cache; 256 KiB, in L2, took 1.1-1.3x as long), at least 16 and at
/// most 4096 elements, and never more than `len`.
fn tile_len<T>(regs: usize, len: usize) -> usize {
    let budget = (32 << 10) / (std::mem::size_of::<T>() * regs.max(1));
    budget.clamp(16, 4096).min(len.max(1))
}

/// Stores a tile into an output's uninitialized part.
#[inline(always)]
fn store<T: Copy>(dst: &mut [MaybeUninit<T>], src: &[T]) {
    debug_assert_eq!(dst.len(), src.len());
    // SAFETY: both slices have `src.len()` elements and do not overlap (a register tile and an
    // output buffer); MaybeUninit<T> has T's layout.
    unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst.as_mut_ptr() as *mut T, src.len()) }
}

vmath::avx2_build! {
    /// [`run_range_body`] with the AVX2 build of its loops where the CPU has it (as the
    /// unfused elementwise kernels, [`super::zip`]; [`vmath::avx2_build`]).
    fn run_range[T: FusedFloat](p: &Program, ins: &Inputs<T>, lo: usize, outs: &mut [&mut [MaybeUninit<T>]], tile: usize) => run_range_body
}

/// A run's inputs: per input its elements in the run's memory order (empty for a
/// one-element input, which is `pinned[i]`, and for a `Bool` one), for a row or column how
/// it spreads, for a matrix in the other order how its elements map (`data` then holds them
/// in that order), and for a full-size `Bool` input (a mask made outside the cluster) its
/// elements in the run's order (else empty).
struct Inputs<'a, T> {
    data: Vec<&'a [T]>,
    pinned: Vec<T>,
    spread: Vec<Option<Spread>>,
    other: Vec<Option<OtherOrder>>,
    masks: Vec<&'a [bool]>,
}

impl<T> Inputs<'_, T> {
    /// Whether input `i` is staged tile by tile (spread, transposed or converted) rather than
    /// read in place.
    fn staged(&self, i: usize) -> bool {
        self.spread[i].is_some() || self.other[i].is_some() || !self.masks[i].is_empty()
    }
}

/// Runs the program over elements `lo..lo + outs[k].len()` of the inputs, writing every
/// element of each output's part `outs[k]`.
#[inline(always)]
fn run_range_body<T: FusedFloat>(p: &Program, inputs: &Inputs<T>, lo: usize, outs: &mut [&mut [MaybeUninit<T>]], tile: usize) {
    let (ins, pinned_in) = (&inputs.data, &inputs.pinned);
    let count = outs.first().map_or(0, |o| o.len());
    let mut regs: Vec<Vec<T>> = vec![vec![T::zero(); tile]; p.num_regs];
    let mut pinned = vec![false; p.num_regs];
    p.pinned_inputs.iter().map(|&(r, _)| r).chain(p.pinned_consts.iter().map(|&(r, _)| r)).for_each(|r| pinned[r as usize] = true);
    // the current tile of each staged input: a row or column spread over it, a matrix in the
    // other order transposed, a Bool one as a mask
    let mut staged: Vec<Vec<T>> = (0..inputs.spread.len()).map(|i| if inputs.staged(i) { vec![T::zero(); tile] } else { Vec::new() }).collect();
    let mut lines: Vec<Lines<T>> = inputs.other.iter().map(|_| Lines::new()).collect();
    for &(r, i) in &p.pinned_inputs {
        regs[r as usize].fill(pinned_in[i as usize]);
    }
    for &(r, v) in &p.pinned_consts {
        regs[r as usize].fill(T::from_f64(v));
    }
    for &(k, r) in &p.pinned_outputs {
        let v = regs[r as usize][0];
        outs[k as usize].iter_mut().for_each(|o| {
            o.write(v);
        });
    }
    let mut off = 0;
    while off < count {
        let n = tile.min(count - off);
        let at = lo + off;
        for (i, s) in inputs.spread.iter().enumerate() {
            if let Some(s) = s {
                s.fill(ins[i], at, &mut staged[i][..n]);
            }
        }
        for (i, t) in inputs.other.iter().enumerate() {
            if let Some(t) = t {
                t.fill(ins[i], at, &mut staged[i][..n], &mut lines[i]);
            }
        }
        for (i, m) in inputs.masks.iter().enumerate().filter(|(_, m)| !m.is_empty()) {
            staged[i][..n].iter_mut().zip(&m[at..at + n]).for_each(|(d, &b)| *d = mask(b));
        }
        let input = |i: u32| if inputs.staged(i as usize) { &staged[i as usize][..n] } else { &ins[i as usize][at..at + n] };
        for ins_ in &p.code {
            match *ins_ {
                Instr::Un { f, x, dst, out } => {
                    let mut d = std::mem::take(&mut regs[dst as usize]);
                    let xs = match x {
                        Operand::Reg(r) => &regs[r as usize][..n],
                        Operand::In(i) => input(i),
                    };
                    apply1(f, xs, &mut d[..n]);
                    if let Some(k) = out {
                        store(&mut outs[k as usize][off..off + n], &d[..n]);
                    }
                    regs[dst as usize] = d;
                }
                Instr::Bin { f, a, b, dst, out } => {
                    let mut d = std::mem::take(&mut regs[dst as usize]);
                    let src = |o: Operand| match o {
                        Operand::Reg(r) => &regs[r as usize][..n],
                        Operand::In(i) => input(i),
                    };
                    match (f, b) {
                        (Fn2::Pow, Operand::Reg(r)) if pinned[r as usize] => pow_by(src(a), regs[r as usize][0], &mut d[..n]),
                        _ => apply2(f, src(a), src(b), &mut d[..n]),
                    }
                    if let Some(k) = out {
                        store(&mut outs[k as usize][off..off + n], &d[..n]);
                    }
                    regs[dst as usize] = d;
                }
                Instr::Sel { c, x, y, dst, out } => {
                    let mut d = std::mem::take(&mut regs[dst as usize]);
                    let src = |o: Operand| match o {
                        Operand::Reg(r) => &regs[r as usize][..n],
                        Operand::In(i) => input(i),
                    };
                    select(src(c), src(x), src(y), &mut d[..n]);
                    if let Some(k) = out {
                        store(&mut outs[k as usize][off..off + n], &d[..n]);
                    }
                    regs[dst as usize] = d;
                }
            }
        }
        off += n;
    }
}

/// The elements of `a` (a full input in the other memory order) in column-major order when
/// `column`, else row-major, with the strided copy's tiled transpose.
fn order_copy<T: Copy>(a: &ArcArray<T, IxDyn>, column: bool) -> Vec<T> {
    crate::strided::dense_copy(&a.view(), column).into_raw_vec_and_offset().0
}

/// The memory order of a value of a cluster: that of a matrix (or higher rank) in row-
/// or column-major order, or none of its own (a single element, a constant, a vector).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Order {
    Any,
    Row,
    Column,
}

/// The memory order each output of `p` would have if its ops ran one by one, given the
/// full inputs' orders `inputs` (`Any` for the one-element ones): a unary map keeps its
/// operand's order, a binary op (and each add of `AddN`) takes its operands' common order
/// and column-major for opposite ones (the per-op kernels' rule, [`super::zip`]), and
/// `BroadcastTo` of one element to rank `>= 2` (`rank2`) writes column-major. A constant
/// (`OnesLike`, `ZerosLike`) counts as having no order, where the op's own kernel fills in
/// its input's: a constant that leaves the cluster may be stored in the other order than
/// unfused (never with other values).
fn memory_orders(p: &Program, inputs: &[Order], rank2: bool) -> Vec<Order> {
    let mut regs = vec![Order::Any; p.num_regs];
    let mut outs = vec![Order::Any; p.num_outputs];
    let of = |regs: &[Order], o: Operand| match o {
        Operand::Reg(r) => regs[r as usize],
        Operand::In(i) => inputs[i as usize],
    };
    let join = |a: Order, b: Order| match (a, b) {
        (Order::Any, o) | (o, Order::Any) => o,
        (Order::Row, Order::Row) => Order::Row,
        _ => Order::Column,
    };
    for i in &p.code {
        let (o, dst, out) = match *i {
            Instr::Un { f: Fn1::Splat, dst, out, .. } => (if rank2 { Order::Column } else { Order::Any }, dst, out),
            Instr::Un { x, dst, out, .. } => (of(&regs, x), dst, out),
            Instr::Bin { a, b, dst, out, .. } => (join(of(&regs, a), of(&regs, b)), dst, out),
            // `SelectV2`'s kernel keeps the order its full operands share and gives
            // mixed ones row-major (`select_in_order`, else ndarray's Zip)
            Instr::Sel { c, x, y, dst, out } => {
                let os = [of(&regs, c), of(&regs, x), of(&regs, y)];
                let o = if os.contains(&Order::Row) {
                    Order::Row
                } else if os.contains(&Order::Column) {
                    Order::Column
                } else {
                    Order::Any
                };
                (o, dst, out)
            }
        };
        regs[dst as usize] = o;
        if let Some(k) = out {
            outs[k as usize] = o;
        }
    }
    outs
}

/// Relative cost of an instruction per element, for the decision to shard: a libm or
/// vector-math function (`Exp`, `Tanh`, `Pow`, ...) costs several times an add.
fn instr_cost(i: &Instr) -> usize {
    match *i {
        Instr::Un { f: Fn1::V(_), .. } | Instr::Bin { f: Fn2::Pow | Fn2::Div, .. } => 8,
        _ => 1,
    }
}

/// Elements × instruction costs ([`instr_cost`]) above which a run is split over the
/// intra-op pool.
const SHARD_WORK: usize = 1 << 16;

fn run_typed<T: FusedFloat>(ctx: &KernelCtx, p: &Program) -> Result<Outputs> {
    let len = p.len;
    if ctx.inputs.len() != p.num_inputs {
        return Err(ctx.error(format!("{} inputs, the program takes {}", ctx.inputs.len(), p.num_inputs)));
    }
    // the cluster's shape (every member's output has it)
    let dims = ctx.node.outputs.first().map_or(&[][..], |t| t.shape.dims());
    let mut pinned_in = vec![T::zero(); p.num_inputs];
    // per input its array when not pinned: the cluster's float type, or Bool (a mask made
    // outside the cluster: a fed condition, a comparison read by other ops too)
    let mut full: Vec<Option<&ArcArray<T, IxDyn>>> = Vec::with_capacity(p.num_inputs);
    let mut bools: Vec<Option<&ArcArray<bool, IxDyn>>> = Vec::with_capacity(p.num_inputs);
    for (i, t) in ctx.inputs.iter().enumerate() {
        let want = match p.inputs[i] {
            InputKind::Full => len,
            InputKind::One => 1,
            InputKind::Vector(Vector::Row) => dims.get(1).copied().unwrap_or(0),
            InputKind::Vector(Vector::Column) => dims.first().copied().unwrap_or(0),
        };
        let (a, b) = match (T::view(t), bool::view(t)) {
            (Some(a), _) => (Some(a), None),
            // (the pass takes no Bool row or column)
            (None, Some(b)) if !matches!(p.inputs[i], InputKind::Vector(_)) => (None, Some(b)),
            _ => return Err(ctx.error(format!("input {i} is {}, expected {}", t.dtype(), T::DTYPE))),
        };
        let got = a.map_or_else(|| b.map_or(0, |b| b.len()), |a| a.len());
        if got != want {
            return Err(ctx.error(format!("input {i} has {got} elements, expected {want}")));
        }
        if p.inputs[i] == InputKind::One {
            pinned_in[i] = match (a, b) {
                (Some(a), _) => a.iter().next().copied().unwrap_or(T::zero()),
                (_, b) => mask(b.and_then(|b| b.iter().next().copied()).unwrap_or(false)),
            };
            full.push(None);
            bools.push(None);
        } else {
            full.push(a);
            bools.push(b);
        }
    }
    // The elements run in memory order: the order the unfused kernels would give the
    // outputs ([`memory_orders`]), column-major when any is; a matrix input in the other
    // order is transposed tile by tile ([`OtherOrder`]), one of higher rank or a mask is
    // copied into the run's order first; an output the kernels would give in the other
    // order is copied into that order after the run, so reductions after it add in the
    // same order, to the same bits.
    let rank2 = dims.len() >= 2;
    fn order_of<S>(a: &ArcArray<S, IxDyn>) -> Order {
        match a.ndim() {
            0 | 1 => Order::Any,
            _ if crate::strided::is_column_major(a) => Order::Column,
            _ => Order::Row,
        }
    }
    // (a row or column has no order of its own: the unfused kernels follow the full operand)
    let in_orders: Vec<Order> = (0..p.num_inputs)
        .map(|i| match (full[i], bools[i]) {
            _ if p.inputs[i] != InputKind::Full => Order::Any,
            (Some(a), _) => order_of(a),
            (_, Some(b)) => order_of(b),
            _ => Order::Any,
        })
        .collect();
    let out_orders = memory_orders(p, &in_orders, rank2);
    let column = out_orders.iter().all(|&o| o == Order::Any) || out_orders.contains(&Order::Column);
    /// The input's elements in the run's order: in place, or in `copy` made here.
    fn in_order<'a, S: Copy>(a: Option<&'a ArcArray<S, IxDyn>>, column: bool, copy: &'a mut Option<Vec<S>>) -> &'a [S] {
        match a {
            Some(a) if !(if column { a.t().is_standard_layout() } else { a.is_standard_layout() }) => copy.insert(order_copy(a, column)),
            Some(a) => a.as_slice_memory_order().unwrap_or(&[]),
            None => &[],
        }
    }
    let other: Vec<Option<OtherOrder>> = full.iter().map(|&a| a.and_then(|a| OtherOrder::of(a, dims, column))).collect();
    let mut copies: Vec<Option<Vec<T>>> = vec![None; p.num_inputs];
    let mut mask_copies: Vec<Option<Vec<bool>>> = vec![None; p.num_inputs];
    // (an input in the other order is read in its own order, where no copy is needed)
    let data: Vec<&[T]> = full.iter().zip(copies.iter_mut()).zip(&other).map(|((&a, c), t)| in_order(a, column != t.is_some(), c)).collect();
    let masks: Vec<&[bool]> = bools.iter().zip(mask_copies.iter_mut()).map(|(&b, c)| in_order(b, column, c)).collect();
    let spread = p.inputs.iter().map(|k| if let InputKind::Vector(v) = k { Some(v.spread(dims, column)) } else { None }).collect();
    let ins = Inputs { data, pinned: pinned_in, spread, other, masks };
    // outputs written once, by the run (no zeroing pass first); every element of each is
    // written: by the instruction that computes it, or the fill of a pinned output
    let mut outs: Vec<Vec<T>> = (0..p.num_outputs).map(|_| crate::strided::buffer_for(len)).collect();
    let tile = tile_len::<T>(p.num_regs, len);
    let threads = intra_op::intra_op_threads();
    let work = len.saturating_mul(p.code.iter().map(instr_cost).sum());
    if threads > 1 && len >= 2 * tile && work >= SHARD_WORK {
        let chunk = len.div_ceil(threads).div_ceil(tile) * tile;
        let mut parts: Vec<(usize, Vec<&mut [MaybeUninit<T>]>)> = (0..len.div_ceil(chunk)).map(|c| (c * chunk, Vec::new())).collect();
        for o in outs.iter_mut() {
            for (c, piece) in o.spare_capacity_mut()[..len].chunks_mut(chunk).enumerate() {
                parts[c].1.push(piece);
            }
        }
        let ins = &ins;
        intra_op::parallel_for_each(parts, |(lo, mut o)| run_range(p, ins, lo, &mut o, tile));
    } else {
        let mut o: Vec<&mut [MaybeUninit<T>]> = outs.iter_mut().map(|v| &mut v.spare_capacity_mut()[..len]).collect();
        run_range(p, &ins, 0, &mut o, tile);
    }
    for v in outs.iter_mut() {
        // SAFETY: the run wrote all `len` elements of every output (see above).
        unsafe { v.set_len(len) };
    }
    let nodes = &ctx.node.outputs;
    outs.into_iter()
        .zip(nodes)
        .zip(out_orders)
        .map(|((v, tt), order)| {
            Ok(match tt.dtype {
                // a mask leaving the cluster: its 1s and 0s as Bool
                DType::Bool => Tensor::Bool(shaped(ctx, tt, v.iter().map(|&x| x != T::zero()).collect(), column, order)?),
                _ => T::wrap(shaped(ctx, tt, v, column, order)?),
            })
        })
        .collect()
}

/// An output's elements `v` (in the run's order, column-major when `column`) as an array of
/// its shape, in the order the unfused kernels would give it (`order`).
fn shaped<S: Copy>(ctx: &KernelCtx, tt: &TensorType, v: Vec<S>, column: bool, order: Order) -> Result<ArcArray<S, IxDyn>> {
    let dims = IxDyn(tt.shape.dims());
    let shaped = if column { ArcArray::from_shape_vec(dims.f(), v) } else { ArcArray::from_shape_vec(dims, v) };
    let a = shaped.map_err(|e| ctx.error(format!("output of shape {}: {e}", tt.shape)))?;
    // (a row-major output of a column-major run: copied into its own order)
    Ok(if column && order == Order::Row { crate::strided::dense_copy(&a.view(), false).into_shared() } else { a })
}

/// The kernel: the program is the node's `program` attribute.
fn kernel_fused(ctx: &KernelCtx) -> Result<Outputs> {
    let Some(AttrValue::Program(p)) = ctx.node.attrs.get("program") else {
        return Err(ctx.error("no fused program (the op is made by the graph optimizer only)"));
    };
    // the float type of the cluster: its float outputs' and inputs' (a cluster whose
    // outputs are all masks still reads floats)
    let float = ctx.node.outputs.iter().map(|t| t.dtype).chain(ctx.inputs.iter().map(|t| t.dtype())).find(|&d| d != DType::Bool);
    match float {
        Some(DType::Float32) => run_typed::<f32>(ctx, p),
        Some(DType::Float64) => run_typed::<f64>(ctx, p),
        d => Err(ctx.error(format!("no kernel for dtype {d:?}"))),
    }
}

fn infer_fused(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    Err(ctx.invalid("is made by the graph optimizer for a plan; it cannot be added to a graph"))
}

/// The op of fused steps (not in the registry: graphs never hold it).
pub static FUSED_ELEMENTWISE: OpDef = OpDef {
    name: "_FusedElementwise",
    default_name: "_FusedElementwise",
    arity: Arity::AtLeast(0),
    ref_inputs: &[],
    infer: infer_fused,
    kernel: kernel_fused,
    gpu: GpuSupport::None,
    inputs: &[],
    attrs: &[],
    launch: GpuLaunch::None,
    grad: Gradient::Undefined,
    stateful: false,
    inexpensive: false,
    host_memory: &[],
};

/// Whether `op` is one the pass may fuse (float dtypes only; the caller checks those).
pub fn fusable(op: &str) -> bool {
    matches!(
        op,
        "Neg"
            | "Square"
            | "Sin"
            | "Cos"
            | "Tan"
            | "Abs"
            | "Floor"
            | "Exp"
            | "Log"
            | "Tanh"
            | "Sigmoid"
            | "Sqrt"
            | "Relu"
            | "Add"
            | "Sub"
            | "Mul"
            | "RealDiv"
            | "Maximum"
            | "Minimum"
            | "Pow"
            | "TanhGrad"
            | "SigmoidGrad"
            | "ReluGrad"
            | "OnesLike"
            | "ZerosLike"
            | "AddN"
            | "BroadcastTo"
            | "Greater"
            | "GreaterEqual"
            | "Less"
            | "LessEqual"
            | "Equal"
            | "SelectV2"
    )
}

/// Shares a program between the synthetic node's attrs and the plan.
pub fn program_attr(p: Program) -> AttrValue {
    AttrValue::Program(Arc::new(p))
}
