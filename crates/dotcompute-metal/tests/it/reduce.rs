//! A reducer for a disagreement that `random_kernels` found between NVIDIA Vulkan (wgpu)
//! and CUDA: it deletes statements and replaces expressions by their operands or by zero
//! while CUDA still gives one answer and wgpu still differs from it in `ou`, and prints
//! what is left (IR, WGSL, CUDA C++, the values). A tool, not a check: it runs only when
//! asked, on a machine with CUDA and wgpu:
//!
//! ```text
//! DOTCOMPUTE_SEED=4710405778595751319 DOTCOMPUTE_REDUCE_OUT=dir \
//!     <metal test binary> --ignored reduce::a_disagreement
//! ```
//!
//! Barriers are never deleted (a race would make the backends differ for another reason);
//! CUDA answering the same twice guards against races made otherwise.

use crate::random_kernels::{
    dotcompute_codegen_ir_text, random_inputs, random_kernel, try_run, Outputs,
};
use dotcompute::ir::{Expr, ExprKind, Kernel, Literal, ScalarType, Stmt};
use dotcompute::{BackendKind, Device};

/// The two devices a reduction compares (the CPU backend runs `#[kernel]` functions
/// only, so it cannot be a third).
struct Judges {
    cuda: Device,
    wgpu: Device,
}

/// The inputs a kernel runs on.
struct Inputs {
    a: Vec<i32>,
    b: Vec<u32>,
    x: Vec<f32>,
}

impl Judges {
    /// CUDA's and wgpu's outputs when the kernel still shows the disagreement: it is
    /// valid, launches on both, CUDA gives the same outputs twice (a replaced index could
    /// make a race), and wgpu differs from CUDA in `ou`.
    fn disagreement(&self, k: &Kernel, inp: &Inputs) -> Option<(Outputs, Outputs)> {
        dotcompute::ir::validate(k).ok()?;
        let want = try_run(&self.cuda, k, &inp.a, &inp.b, &inp.x).ok()?;
        let again = try_run(&self.cuda, k, &inp.a, &inp.b, &inp.x).ok()?;
        if want.first_difference(&again).is_some() {
            return None;
        }
        let got = try_run(&self.wgpu, k, &inp.a, &inp.b, &inp.x).ok()?;
        (got.ou != want.ou).then_some((want, got))
    }
}

/// How many statements `stmts` holds, nested ones included.
fn count_stmts(stmts: &[Stmt]) -> usize {
    let mut n = 0;
    dotcompute::ir::walk_stmts(stmts, &mut |_| n += 1);
    n
}

/// Deletes the statement at pre-order position `n` (counted down as statements are
/// passed) unless it is a barrier: `Some(deleted)` once the position is reached.
fn delete_stmt(stmts: &mut Vec<Stmt>, n: &mut usize) -> Option<bool> {
    for at in 0..stmts.len() {
        if *n == 0 {
            let barrier = matches!(stmts[at], Stmt::Barrier);
            if !barrier {
                stmts.remove(at);
            }
            return Some(!barrier);
        }
        *n -= 1;
        let reached = match &mut stmts[at] {
            Stmt::If {
                then, otherwise, ..
            } => delete_stmt(then, n).or_else(|| delete_stmt(otherwise, n)),
            Stmt::For { body, .. } | Stmt::Loop { body } => delete_stmt(body, n),
            _ => None,
        };
        if reached.is_some() {
            return reached;
        }
    }
    None
}

/// Calls `f` on every expression node of the kernel, inner before outer, with its
/// position in that order.
fn each_expr(k: &mut Kernel, f: &mut impl FnMut(usize, &mut Expr)) {
    let mut at = 0;
    dotcompute::ir::walk_stmts_mut(&mut k.body, &mut |s| {
        for e in s.exprs_mut() {
            e.walk_mut(&mut |e| {
                f(at, e);
                at += 1;
            });
        }
    });
}

/// Simpler expressions that could stand for `e`: its operands of its own type, then zero.
fn simpler(e: &Expr) -> Vec<Expr> {
    let mut out: Vec<Expr> = match &e.kind {
        ExprKind::Unary(_, a) | ExprKind::Cast(a) | ExprKind::Bitcast(a) => vec![(**a).clone()],
        ExprKind::Binary(_, a, b) => vec![(**a).clone(), (**b).clone()],
        ExprKind::Math(_, args) => args.clone(),
        ExprKind::Select {
            then, otherwise, ..
        } => vec![(**then).clone(), (**otherwise).clone()],
        _ => vec![],
    };
    out.retain(|c| c.ty == e.ty);
    let zero = e.ty.as_scalar().and_then(|s| match s {
        ScalarType::I32 => Some(Literal::I32(0)),
        ScalarType::U32 => Some(Literal::U32(0)),
        ScalarType::F32 => Some(Literal::F32(0)),
        ScalarType::Bool => Some(Literal::Bool(false)),
        _ => None,
    });
    if let (Some(zero), false) = (zero, matches!(e.kind, ExprKind::Literal(_))) {
        out.push(Expr {
            ty: e.ty,
            kind: ExprKind::Literal(zero),
        });
    }
    out
}

/// One pass of statement deletions; whether any held.
fn delete_statements(holds: &dyn Fn(&Kernel) -> bool, k: &mut Kernel) -> bool {
    let mut progress = false;
    let mut at = 0;
    while at < count_stmts(&k.body) {
        let mut trial = k.clone();
        if delete_stmt(&mut trial.body, &mut at.clone()) == Some(true) && holds(&trial) {
            *k = trial;
            progress = true;
        } else {
            at += 1;
        }
    }
    progress
}

/// One pass of expression replacements; whether any held.
fn simplify_expressions(holds: &dyn Fn(&Kernel) -> bool, k: &mut Kernel) -> bool {
    let mut progress = false;
    let mut at = 0;
    loop {
        let mut candidates = None;
        each_expr(&mut k.clone(), &mut |i, e| {
            if i == at {
                candidates = Some(simpler(e));
            }
        });
        let Some(candidates) = candidates else {
            return progress;
        };
        let held = candidates.into_iter().find_map(|c| {
            let mut trial = k.clone();
            let mut c = Some(c);
            each_expr(&mut trial, &mut |i, e| {
                if i == at {
                    *e = c.take().expect("one position");
                }
            });
            holds(&trial).then_some(trial)
        });
        match held {
            Some(trial) => {
                *k = trial;
                progress = true;
            }
            None => at += 1,
        }
    }
}

/// Deletes statements and simplifies expressions of `k` while `holds` stays true, until
/// neither changes anything.
fn reduce(k: &mut Kernel, holds: &dyn Fn(&Kernel) -> bool) {
    let mut rounds = 0;
    while delete_statements(holds, k) | simplify_expressions(holds, k) {
        rounds += 1;
        eprintln!("round {rounds}: {} statements left", count_stmts(&k.body));
    }
}

/// The reducer itself, on the MSL shim (the CPU backend runs `#[kernel]` functions only,
/// not kernels built as IR): a random kernel reduced while its first `ou` stays the
/// same ends valid, still computing that value, and smaller.
#[test]
fn the_reducer_keeps_what_it_is_asked_to_keep() {
    let Some(shim) = crate::shim_device() else {
        return;
    };
    let seed = 4710405778595751319;
    let mut k = random_kernel(seed);
    let (a, b, x) = random_inputs(seed);
    let inp = Inputs {
        a: a[..1].to_vec(),
        b: b[..1].to_vec(),
        x: x[..1].to_vec(),
    };
    let ou = |k: &Kernel| {
        dotcompute::ir::validate(k).ok()?;
        Some(try_run(&shim, k, &inp.a, &inp.b, &inp.x).ok()?.ou[0])
    };
    let want = ou(&k).expect("the random kernel runs");
    let before = count_stmts(&k.body);
    reduce(&mut k, &|t| ou(t) == Some(want));
    assert_eq!(ou(&k), Some(want));
    assert!(
        count_stmts(&k.body) < before / 2,
        "{before} statements, {} left",
        count_stmts(&k.body)
    );
}

#[test]
#[ignore = "a tool: DOTCOMPUTE_SEED and DOTCOMPUTE_REDUCE_OUT; needs CUDA and wgpu"]
fn a_disagreement() {
    let Some(seed) = std::env::var("DOTCOMPUTE_SEED")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
    else {
        return eprintln!("skipping: DOTCOMPUTE_SEED is not set");
    };
    let open = |kind| Device::with_backend(kind).unwrap_or_else(|e| panic!("{kind}: {e}"));
    let j = Judges {
        cuda: open(BackendKind::Cuda),
        wgpu: open(BackendKind::Wgpu),
    };
    let mut k = random_kernel(seed);
    let (a, b, x) = random_inputs(seed);
    let mut inp = Inputs { a, b, x };
    let (want, got) = j
        .disagreement(&k, &inp)
        .unwrap_or_else(|| panic!("kernel seed {seed} shows no disagreement in ou"));
    // One element is enough when its own inputs still show it.
    let e = (0..want.ou.len())
        .find(|&e| want.ou[e] != got.ou[e])
        .unwrap();
    let one = Inputs {
        a: vec![inp.a[e]],
        b: vec![inp.b[e]],
        x: vec![inp.x[e]],
    };
    if j.disagreement(&k, &one).is_some() {
        inp = one;
    }
    reduce(&mut k, &|t| j.disagreement(t, &inp).is_some());
    let (want, got) = j
        .disagreement(&k, &inp)
        .expect("the reduced kernel still differs");
    let wgsl = dotcompute_codegen::wgsl::generate(&k, &Default::default())
        .map(|m| m.source)
        .unwrap_or_else(|e| format!("{e}"));
    let cuda = dotcompute_codegen::cuda::generate(&k).source;
    let values = format!(
        "inputs a={:?} b={:?} x={:?}\nou on CUDA: {:?}\nou on wgpu: {:?}\n",
        &inp.a[..inp.a.len().min(8)],
        &inp.b[..inp.b.len().min(8)],
        &inp.x[..inp.x.len().min(8)],
        &want.ou[..want.ou.len().min(8)],
        &got.ou[..got.ou.len().min(8)],
    );
    let ir = dotcompute_codegen_ir_text(&k);
    eprintln!("{ir}\n{wgsl}\n{values}");
    if let Some(dir) = std::env::var_os("DOTCOMPUTE_REDUCE_OUT") {
        let dir = std::path::PathBuf::from(dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("reduced.ir"), &ir).unwrap();
        std::fs::write(dir.join("reduced.wgsl"), &wgsl).unwrap();
        std::fs::write(dir.join("reduced.cu"), &cuda).unwrap();
        std::fs::write(dir.join("reduced.values"), &values).unwrap();
    }
}
