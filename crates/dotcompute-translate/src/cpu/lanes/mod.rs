//! A split group body's barrier-free region in lane form: the statements run for
//! `LANES` threads at a time (`dotcompute_cpu::lanes` is the runtime half and states the
//! semantics). Each per-thread local becomes a `[T; LANES]`, each operation a loop over
//! the lanes; values that are the same for every thread (literals, constants, scalar
//! parameters, group-level locals, `group_id()`) stay scalars. Types are never named:
//! every lane operation is a closure around the same `__dc::ops` call the thread-by-thread
//! code makes, so the compiler infers them as it does there.
//!
//! Only a subset is taken: scalar locals, arithmetic, comparisons, math methods, casts to
//! scalar types, loads and stores of buffers and shared arrays (one-dimensional index),
//! `if`, `while`, and `for` over a range that is the same for every thread. Anything else
//! (a call, an atomic, a local array, `break` / `continue` / `return`, a vector, a 2-D
//! shared array) makes [`region`] answer `None`, and the region keeps its loop over
//! threads.

use super::fission::{has_loop, names_in, simple_let};
use super::{
    binary_op, builtins, compound_op, for_range, is_call_to, math_methods, unparen, usize_step,
    Binding, Tx,
};
use proc_macro2::TokenStream;
use quote::{format_ident, quote, ToTokens};
use std::collections::HashMap;
use syn::{BinOp, Expr, Pat, RangeLimits, Stmt, Type, UnOp};

mod expr;
use expr::*;

/// A value in lane code.
enum V {
    /// The same in every lane: a scalar expression.
    One(TokenStream),
    /// A `[T; LANES]` expression.
    Lanes(TokenStream),
    /// Lanes known to hold `base, base + 1, ...` (`local_id().x` plus values the same
    /// for every lane): an index a chunk's threads take in order, loaded or stored as
    /// one vector with no test that it counts up. `ok`: `None` where that holds always;
    /// else a `bool` expression that says whether it holds now (a mutable local, such as
    /// a grid-stride loop's index, is a run until a masked assignment splits its lanes).
    Run {
        lanes: TokenStream,
        base: TokenStream,
        ok: Option<TokenStream>,
    },
}

impl V {
    fn lanes(self) -> TokenStream {
        match self {
            V::One(t) => quote!(__dc::cpu::lanes::splat(#t)),
            V::Lanes(t) | V::Run { lanes: t, .. } => t,
        }
    }
}

/// Scalar tests of a condition of lanes: `all` true shows it holds in every lane,
/// `none` true that it holds in none (either may be false when it does).
struct LaneTests {
    all: TokenStream,
    none: TokenStream,
}

/// How a local of lane code holds its value.
#[derive(Clone)]
pub(super) enum Held {
    /// One value for the chunk.
    Scalar,
    /// One value per lane.
    Lanes,
    /// Lanes that form a run (see [`V::Run`]), lane 0's value in the local `base`;
    /// `ok`: the local that says whether they form one now, for a local that may stop
    /// being a run (a mutable one, or one computed from it).
    Run {
        base: syn::Ident,
        ok: Option<syn::Ident>,
    },
}

struct Emitter<'t> {
    tx: &'t Tx,
    /// Locals declared in the region or brought into it, innermost scope last: whether
    /// each holds lanes (a `for` variable over a uniform range does not).
    scopes: Vec<HashMap<String, Held>>,
    /// Depth of control flow that differs between lanes: 0 at the region's top level,
    /// where an assignment may write every lane (lanes outside the chunk's mask are
    /// never stored back nor used to touch memory).
    masked: u32,
    /// Inside a loop body's copy for when every lane loops.
    all_lanes_copy: bool,
    /// The buffers and shared arrays the region loads or stores.
    arrays: std::collections::BTreeSet<String>,
    /// While emitting the unchecked copy of a loop's body (see [`Emitter::for_loop`]).
    versioning: Option<Versioning>,
    /// Inside the copy of an `if`'s branch for when every lane takes it (see
    /// [`Emitter::every_lane`]): a nested `if` gets no copy of its own (the code would
    /// double at every level).
    every_lane_copy: bool,
}

/// A `for` over a range the same for every lane, whose body is emitted a second time
/// with loads at indices affine in the loop variable (`a + c·v`, `a` and `c` fixed for
/// the loop) not tested against the array's end: that copy runs when `checks`, tested
/// once before the loop, show every such index of every trip in bounds.
struct Versioning {
    var: String,
    start: TokenStream,
    end: TokenStream,
    /// Scopes below this depth are outside the loop body.
    outside: usize,
    checks: Vec<TokenStream>,
}

/// The lane form of a region's statements, or `None` where it uses something lane form
/// does not take. `locals`: the per-thread locals the region starts with (brought in
/// from slots, or recomputed from the thread's ids), and whether each holds lanes.
/// Also returns, for each local the region declares at its top level, whether it holds
/// lanes (a scalar is broadcast where a slot stores it), and the arrays it accesses.
pub(super) fn region(
    tx: &Tx,
    locals: &[(String, Held)],
    stmts: &[&Stmt],
) -> Option<(TokenStream, HashMap<String, bool>, Vec<String>)> {
    let mut e = Emitter::new(tx, locals.iter().cloned().collect());
    e.scopes.push(HashMap::new());
    let mut out = TokenStream::new();
    for s in stmts {
        out.extend(e.stmt(s)?);
    }
    let declared = e.scopes.pop()?;
    let declared = declared
        .into_iter()
        .map(|(name, held)| (name, !matches!(held, Held::Scalar)))
        .collect();
    Some((out, declared, e.arrays.into_iter().collect()))
}

/// `let name = init;` for a local computed from the thread's ids, in lane form, and
/// whether it holds lanes (`local_id().y` is one value for a chunk).
pub(super) fn recomputed(tx: &Tx, stmt: &Stmt) -> Option<(TokenStream, Held)> {
    let mut e = Emitter::new(tx, HashMap::new());
    let tokens = e.stmt(stmt)?;
    let lanes = e.scopes[0].values().next().cloned()?;
    Some((tokens, lanes))
}

impl<'t> Emitter<'t> {
    /// An emitter at a region's top level whose outermost scope is `locals`.
    fn new(tx: &'t Tx, locals: HashMap<String, Held>) -> Emitter<'t> {
        Emitter {
            tx,
            scopes: vec![locals],
            masked: 0,
            all_lanes_copy: false,
            arrays: Default::default(),
            versioning: None,
            every_lane_copy: false,
        }
    }

    /// `f` at mask depth `masked` (and in the all-lanes copy of a loop body or not), the
    /// emitter's own depth restored after.
    fn at<R>(&mut self, masked: u32, all_lanes_copy: bool, f: impl FnOnce(&mut Self) -> R) -> R {
        let saved = (self.masked, self.all_lanes_copy);
        (self.masked, self.all_lanes_copy) = (masked, all_lanes_copy);
        let r = f(self);
        (self.masked, self.all_lanes_copy) = saved;
        r
    }

    /// Whether `name` is a lane local (`Some(true)`), a scalar local of the region
    /// (`Some(false)`), or neither (a parameter, a group-level local, a constant).
    fn local(&self, name: &str) -> Option<bool> {
        self.held(name).map(|h| !matches!(h, Held::Scalar))
    }

    fn held(&self, name: &str) -> Option<&Held> {
        self.scopes.iter().rev().find_map(|s| s.get(name))
    }

    fn block(&mut self, stmts: &[Stmt]) -> Option<TokenStream> {
        self.scopes.push(HashMap::new());
        let mut out = TokenStream::new();
        for s in stmts {
            match self.stmt(s) {
                Some(t) => out.extend(t),
                None => {
                    self.scopes.pop();
                    return None;
                }
            }
        }
        self.scopes.pop();
        Some(quote!({ #out }))
    }

    /// Statements under a mask that differs between lanes.
    fn masked_block(&mut self, stmts: &[Stmt]) -> Option<TokenStream> {
        self.at(self.masked + 1, self.all_lanes_copy, |e| e.block(stmts))
    }

    fn stmt(&mut self, s: &Stmt) -> Option<TokenStream> {
        match s {
            Stmt::Local(l) => {
                let (ident, mutable, init) = simple_let(l)?;
                if matches!(init, Expr::Repeat(_) | Expr::Array(_))
                    || l.init.as_ref()?.diverge.is_some()
                {
                    return None;
                }
                let ty = match &l.pat {
                    Pat::Type(pt) => Some(scalar_type(&pt.ty)?),
                    _ => None,
                };
                let v = self.expr(init)?;
                // An immutable local of a value the same in every lane stays one scalar
                // (`let row = global_id().y;`, `let total = red[0];`): its loads are
                // one load, its uses broadcasts. Mutable locals may take lane values
                // later, so they hold lanes.
                if let (V::One(t), false) = (&v, mutable) {
                    self.scopes
                        .last_mut()?
                        .insert(ident.to_string(), Held::Scalar);
                    return Some(match ty {
                        Some(ty) => quote!(let #ident: #ty = #t;),
                        None => quote!(let #ident = #t;),
                    });
                }
                // A run keeps its first lane beside it, for loads and stores at it
                // (`let ak = t * TILE + lx;`); a mutable one, or one that may stop being
                // a run, also whether it is one (`let mut i = global_id().x;`, kept a
                // run by `i += stride;` where every lane takes it).
                let m = mutable.then(|| quote!(mut));
                let mut base_let = TokenStream::new();
                let mut held = Held::Lanes;
                if let V::Run { base, ok, .. } = &v {
                    let base_id = format_ident!("__run_{}", ident);
                    base_let = quote!(let #m #base_id = #base;);
                    let ok_id = match (ok, mutable) {
                        (None, false) => None,
                        (ok, _) => {
                            let ok_id = format_ident!("__ok_{}", ident);
                            let ok = ok.clone().unwrap_or(quote!(true));
                            base_let.extend(quote!(let #m #ok_id: bool = #ok;));
                            Some(ok_id)
                        }
                    };
                    held = Held::Run {
                        base: base_id,
                        ok: ok_id,
                    };
                }
                let v = v.lanes();
                self.scopes.last_mut()?.insert(ident.to_string(), held);
                let decl = match ty {
                    Some(t) => quote!(
                        let #m #ident: __dc::cpu::lanes::Lanes<#t> =
                            __dc::cpu::lanes::conform_to::<#t, _>(#v);
                    ),
                    None => quote!(let #m #ident = #v;),
                };
                Some(quote!(#base_let #decl))
            }
            Stmt::Item(syn::Item::Const(c)) => Some(c.to_token_stream()),
            Stmt::Expr(e, _) => self.expr_stmt(e),
            _ => None,
        }
    }

    fn expr_stmt(&mut self, e: &Expr) -> Option<TokenStream> {
        match e {
            Expr::Assign(a) => self.assign(&a.left, None, &a.right),
            Expr::Binary(b) if compound_op(&b.op).is_some() => {
                self.assign(&b.left, compound_op(&b.op).map(|(_, n)| n), &b.right)
            }
            Expr::If(i) => self.if_stmt(i),
            Expr::While(w) => self.while_loop(w),
            Expr::ForLoop(f) => self.for_loop(f),
            Expr::Block(b) if b.label.is_none() => self.block(&b.block.stmts),
            Expr::Paren(p) => self.expr_stmt(&p.expr),
            _ => None,
        }
    }

    /// `left = right` or `left op= right` (`op`: the `__dc::ops` function).
    fn assign(&mut self, left: &Expr, op: Option<&str>, right: &Expr) -> Option<TokenStream> {
        let v = self.expr(right)?;
        let op_name = op;
        let op = op.map(|o| format_ident!("{o}"));
        match left {
            Expr::Path(p) => {
                let id = p.path.get_ident()?;
                if self.local(&id.to_string()) != Some(true) {
                    return None;
                }
                // A local that tracks whether it is a run: whether it still is one.
                let (v, track) = match self.held(&id.to_string()) {
                    Some(Held::Run { base, ok: Some(ok) }) => {
                        let (base, ok) = (base.clone(), ok.clone());
                        let (v, update) = self.run_update(op_name, v, &base, &ok);
                        (v, Some(update))
                    }
                    _ => (v, None),
                };
                let value = v.lanes();
                // A lane `bool` has two forms (`lanes::B` from comparisons, `bool`
                // from scalars): the value takes the local's.
                let new = match &op {
                    None => quote!(__dc::cpu::lanes::conform(#value, &#id)),
                    Some(f) => quote!({
                        let __v = __dc::cpu::lanes::conform(#value, &#id);
                        __dc::cpu::lanes::each(|__l| __dc::ops::#f(#id[__l], __v[__l]))
                    }),
                };
                let (prelude, update) = track.unwrap_or_default();
                Some(if self.masked == 0 {
                    quote!(#prelude #id = #new; #update)
                } else {
                    quote!(#prelude #id = __dc::cpu::lanes::select(&__m, #new, #id); #update)
                })
            }
            Expr::Index(ix) => {
                let value = v.lanes();
                let mem = self.array(&ix.expr, true)?;
                let (idx, load, store) = lane_access(&mem, self.expr(&ix.index)?);
                // The index before the value, as the thread's own store takes them.
                Some(match &op {
                    None => quote!({
                        let __i = #idx;
                        let __v = #value;
                        #store;
                    }),
                    Some(f) => quote!({
                        let __i = #idx;
                        let __v = #value;
                        let __c = #load;
                        let __v = __dc::cpu::lanes::conform(__v, &__c);
                        let __v = __dc::cpu::lanes::each(|__l| __dc::ops::#f(__c[__l], __v[__l]));
                        #store;
                    }),
                })
            }
            _ => None,
        }
    }

    /// For an assignment of `v` (`op`: a compound assignment's `__dc::ops` function) to
    /// a local that tracks whether it is a run (lane 0 in `base`, whether it is one in
    /// `ok`): the value to assign (a scalar bound first where both uses need it), the
    /// statements before the assignment, and those after it that keep `base` and `ok`
    /// true. It stays a run when given a run, or when a value the same for every lane is
    /// added or subtracted, provided every lane takes the assignment.
    fn run_update(
        &self,
        op: Option<&str>,
        v: V,
        base: &syn::Ident,
        ok: &syn::Ident,
    ) -> (V, (TokenStream, TokenStream)) {
        let mut prelude = TokenStream::new();
        let (v, new_base, new_ok) = match (op, v) {
            (None, V::Run { lanes, base: b, ok }) => {
                let new_ok = ok.clone().unwrap_or(quote!(true));
                (
                    V::Run {
                        lanes,
                        base: b.clone(),
                        ok,
                    },
                    Some(b),
                    new_ok,
                )
            }
            (Some(f @ ("add" | "sub")), V::One(t)) => {
                let f = format_ident!("{f}");
                prelude = quote!(let __s = #t;);
                (
                    V::One(quote!(__s)),
                    Some(quote!(__dc::ops::#f(#base, __s))),
                    quote!(#ok),
                )
            }
            (_, v) => (v, None, quote!(false)),
        };
        let new_ok = match self.masked {
            0 => new_ok,
            _ => quote!(#new_ok && __dc::cpu::lanes::all(&__m)),
        };
        let new_base = new_base.map(|b| quote!(#base = #b;));
        (v, (prelude, quote!(#new_base #ok = #new_ok;)))
    }

    fn if_stmt(&mut self, i: &syn::ExprIf) -> Option<TokenStream> {
        let els = match &i.else_branch {
            None => None,
            Some((_, e)) => Some(match &**e {
                Expr::If(_) | Expr::Block(_) => &**e,
                _ => return None,
            }),
        };
        match self.expr(&i.cond)? {
            V::One(c) => {
                let then = self.block(&i.then_branch.stmts)?;
                let els = match els {
                    None => quote!(),
                    Some(e) => {
                        let e = self.expr_stmt(e)?;
                        quote!(else { #e })
                    }
                };
                Some(quote!(if #c #then #els))
            }
            V::Lanes(c) | V::Run { lanes: c, .. } => {
                let then = self.masked_block(&i.then_branch.stmts)?;
                let els = match els {
                    None => quote!(),
                    Some(e) => {
                        let e =
                            self.at(self.masked + 1, self.all_lanes_copy, |em| em.expr_stmt(e))?;
                        quote!({
                            let __m = __dc::cpu::lanes::and_not(&__m, &__c);
                            if __dc::cpu::lanes::any(&__m) { #e }
                        })
                    }
                };
                let both = quote!({
                    let __c = __dc::cpu::lanes::bools(#c);
                    {
                        let __m = __dc::cpu::lanes::and(&__m, &__c);
                        if __dc::cpu::lanes::any(&__m) #then
                    }
                    #els
                });
                // Where a scalar test shows every lane takes `then` (a bounds guard
                // inside the array): `then` under the same mask, no `else`, no compare
                // of lanes.
                match self.every_lane(&i.cond) {
                    Some(all) => {
                        let fast = self.one_copy(|e| e.block(&i.then_branch.stmts))?;
                        Some(quote!(if #all #fast else #both))
                    }
                    None => Some(both),
                }
            }
        }
    }

    /// `f` emitting the copy of a branch for when every lane takes it.
    fn one_copy<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> R {
        let saved = std::mem::replace(&mut self.every_lane_copy, true);
        let r = f(self);
        self.every_lane_copy = saved;
        r
    }

    /// A scalar `bool` expression that, when true, shows the condition `e` (of lanes)
    /// holds in every lane; `None` where there is none, or inside such a copy already
    /// (the code would double at every level). A run compared with a value the same for
    /// every lane has one (`lanes::run_below` and its kin: the run's ends, unless it
    /// wraps), as has `&&` of two conditions that have one, a uniform one included.
    fn every_lane(&mut self, e: &Expr) -> Option<TokenStream> {
        self.lane_tests(e).map(|t| t.all)
    }

    /// [`Self::every_lane`], with the test that shows the condition holds in no lane.
    fn lane_tests(&mut self, e: &Expr) -> Option<LaneTests> {
        if self.every_lane_copy {
            return None;
        }
        self.lane_tests_of(e)
    }

    fn lane_tests_of(&mut self, e: &Expr) -> Option<LaneTests> {
        let Expr::Binary(b) = unparen(e) else {
            return None;
        };
        if let BinOp::And(_) = b.op {
            let side = |em: &mut Self, x: &Expr| match em.expr(x)? {
                V::One(c) => Some(LaneTests {
                    all: quote!((#c)),
                    none: quote!((!(#c))),
                }),
                _ => em.lane_tests_of(x),
            };
            let (l, r) = (side(self, &b.left)?, side(self, &b.right)?);
            let (la, ra, ln, rn) = (l.all, r.all, l.none, r.none);
            return Some(LaneTests {
                all: quote!((#la && #ra)),
                none: quote!((#ln || #rn)),
            });
        }
        let (l, r) = (self.expr(&b.left)?, self.expr(&b.right)?);
        let (base, ok, bound, turned) = match (l, r) {
            (V::Run { base, ok, .. }, V::One(u)) => (base, ok, u, false),
            (V::One(u), V::Run { base, ok, .. }) => (base, ok, u, true),
            _ => return None,
        };
        // The tests that every lane holds and that none does, for `run < u`, `<=`, `>`,
        // `>=`; `u OP run` is `run OP' u` with `<` and `>`, `<=` and `>=` exchanged.
        const TESTS: [(&str, &str); 4] = [
            ("run_below", "run_at_least"),
            ("run_at_most", "run_above"),
            ("run_above", "run_at_most"),
            ("run_at_least", "run_below"),
        ];
        let op = match b.op {
            BinOp::Lt(_) => 0,
            BinOp::Le(_) => 1,
            BinOp::Gt(_) => 2,
            BinOp::Ge(_) => 3,
            _ => return None,
        };
        let tests = TESTS[if turned { (op + 2) % 4 } else { op }];
        let (all, none) = (format_ident!("{}", tests.0), format_ident!("{}", tests.1));
        let (all, none) = (
            quote!(__dc::cpu::lanes::#all(#base, #bound)),
            quote!(__dc::cpu::lanes::#none(#base, #bound)),
        );
        Some(match ok {
            None => LaneTests { all, none },
            Some(ok) => LaneTests {
                all: quote!((#ok && #all)),
                none: quote!((#ok && #none)),
            },
        })
    }

    fn while_loop(&mut self, w: &syn::ExprWhile) -> Option<TokenStream> {
        if w.label.is_some() {
            return None;
        }
        match self.expr(&w.cond)? {
            V::One(c) => {
                let body = self.block(&w.body.stmts)?;
                let stop = super::poll_stop();
                Some(quote!(while #c { #stop #body }))
            }
            V::Lanes(c) | V::Run { lanes: c, .. } => {
                let body = self.masked_block(&w.body.stmts)?;
                // While every lane of the chunk still loops (most trips), a copy without
                // masks: assignments need no blend, loads no mask test. Inner loops keep
                // one copy (the code would double at every level).
                let body = match self.all_lanes_copy {
                    true => body,
                    false => {
                        let fast = self.at(0, true, |e| e.block(&w.body.stmts))?;
                        quote! {
                            if __dc::cpu::lanes::all(&__m) {
                                let __m: __dc::cpu::lanes::Mask = __dc::cpu::lanes::ALL;
                                #fast
                            } else #body
                        }
                    }
                };
                // Where a scalar test shows every lane still loops, the lanes looping
                // are those that were (none has left: `__w` is not empty). No code is
                // copied for it, so inside a branch's copy too.
                let all = match self.lane_tests_of(&w.cond).map(|t| t.all) {
                    Some(all) => quote!(#all),
                    None => quote!(false),
                };
                let stop = super::poll_stop();
                Some(quote!({
                    // The lanes still looping; the condition is evaluated for them only.
                    let mut __w: __dc::cpu::lanes::Mask = __m;
                    loop {
                        #stop
                        if !#all {
                            {
                                let __m = __w;
                                let __c = __dc::cpu::lanes::bools(#c);
                                __w = __dc::cpu::lanes::and(&__w, &__c);
                            }
                            if !__dc::cpu::lanes::any(&__w) {
                                break;
                            }
                        }
                        let __m = __w;
                        #body
                    }
                }))
            }
        }
    }

    fn for_loop(&mut self, f: &syn::ExprForLoop) -> Option<TokenStream> {
        if f.label.is_some() {
            return None;
        }
        let Pat::Ident(pi) = &*f.pat else { return None };
        let (range, step) = for_range(&f.expr).ok()?;
        let (Some(start), Some(end), RangeLimits::HalfOpen(_)) =
            (&range.start, &range.end, &range.limits)
        else {
            return None;
        };
        let V::One(s) = self.expr(start)? else {
            return None;
        };
        let V::One(e) = self.expr(end)? else {
            return None;
        };
        let header = match step {
            None => quote!((#s)..(#e)),
            Some(st) => {
                // As the translator's `step_arg`: `x as usize` stays a usize.
                let cast = usize_step(st);
                let V::One(v) = self.expr(cast.unwrap_or(st))? else {
                    return None;
                };
                let st = match cast {
                    Some(_) => quote!(((#v) as usize)),
                    None => v,
                };
                quote!(__dc::ops::step_range(#s, #e, #st))
            }
        };
        let var = &pi.ident;
        let outside = self.scopes.len();
        let scope = HashMap::from([(var.to_string(), Held::Scalar)]);
        self.scopes.push(scope.clone());
        let body = self.block(&f.body.stmts);
        self.scopes.pop();
        let body = body?;
        // Loop versioning, for an innermost loop with a step of one (a nested loop's
        // copies would double at every level).
        if step.is_some() || has_loop(&f.body.stmts) {
            let body = super::poll_stop_in_for(&f.body.stmts, body);
            return Some(quote!(for #var in #header #body));
        }
        let saved = self.versioning.replace(Versioning {
            var: var.to_string(),
            start: s,
            end: e,
            outside,
            checks: Vec::new(),
        });
        self.scopes.push(scope);
        let fast = self.block(&f.body.stmts);
        self.scopes.pop();
        let v = std::mem::replace(&mut self.versioning, saved)?;
        let fast = fast?;
        if v.checks.is_empty() {
            return Some(quote!(for #var in #header #body));
        }
        let checks = v.checks;
        Some(quote! {
            if #(#checks)&&* {
                for #var in #header #fast
            } else {
                for #var in #header #body
            }
        })
    }

    /// In a loop's unchecked copy, a load at an index affine in the loop variable
    /// (`index`, whose lane form is `v`), with its check recorded; `None` where the index
    /// is not of that form, or its terms are not fixed for the loop.
    fn unchecked_load(&mut self, mem: &TokenStream, index: &Expr, v: &V) -> Option<V> {
        let ver = self.versioning.as_ref()?;
        let (a, c) = affine(index, &ver.var)?;
        let outside = ver.outside;
        if ![a, c]
            .into_iter()
            .flatten()
            .all(|x| self.invariant(x, outside))
        {
            return None;
        }
        let a = match a.map(|a| self.expr(a)) {
            None => quote!(0u32),
            Some(Some(
                V::One(t)
                | V::Run {
                    base: t, ok: None, ..
                },
            )) => t,
            Some(_) => return None,
        };
        let c = match c.map(|c| self.expr(c)) {
            None => quote!(1u32),
            Some(Some(V::One(t))) => t,
            Some(_) => return None,
        };
        let (width, load) = match v {
            V::One(i) => (
                quote!(1),
                V::One(quote!(unsafe { __dc::cpu::lanes::load_one_unchecked(&#mem, #i) })),
            ),
            V::Run { base, ok: None, .. } => (
                quote!(__dc::cpu::lanes::LANES as u32),
                V::Lanes(quote!(unsafe { __dc::cpu::lanes::load_run_unchecked(&#mem, #base) })),
            ),
            V::Lanes(_) | V::Run { .. } => return None,
        };
        let ver = self.versioning.as_mut()?;
        let (s, e) = (&ver.start, &ver.end);
        ver.checks
            .push(quote!(__dc::cpu::lanes::affine_in(&#mem, #a, #c, #s, #e, #width)));
        Some(load)
    }

    /// Whether `e` has the same value in every trip of the loop whose body starts at
    /// scope depth `outside`: names from outside the body, literals, builtins and
    /// arithmetic (no load, no call).
    fn invariant(&self, e: &Expr, outside: usize) -> bool {
        match e {
            Expr::Lit(_) => true,
            Expr::Paren(p) => self.invariant(&p.expr, outside),
            Expr::Group(g) => self.invariant(&g.expr, outside),
            Expr::Cast(c) => self.invariant(&c.expr, outside),
            Expr::Unary(u) => matches!(u.op, UnOp::Neg(_)) && self.invariant(&u.expr, outside),
            // Every operator of the kernel language is pure.
            Expr::Binary(b) => {
                binary_op(&b.op).is_some()
                    && self.invariant(&b.left, outside)
                    && self.invariant(&b.right, outside)
            }
            Expr::Path(p) => p.path.get_ident().is_some_and(|id| {
                let name = id.to_string();
                !self.scopes[outside..].iter().any(|s| s.contains_key(&name))
            }),
            Expr::Field(f) => matches!(&*f.base, Expr::Call(c) if c.args.is_empty()
                && builtins().any(|(n, _)| is_call_to(c, n))),
            _ => false,
        }
    }

    /// A buffer or shared array named by `e` (one-dimensional); `write`: it is stored to.
    fn array(&mut self, e: &Expr, write: bool) -> Option<TokenStream> {
        let Expr::Path(p) = e else { return None };
        let id = p.path.get_ident()?;
        let name = id.to_string();
        if self.local(&name).is_some() || self.tx.row_len.contains_key(&name) {
            return None;
        }
        match self.tx.lookup(&name)? {
            Binding::Buffer | Binding::Shared => {}
            Binding::ReadOnlyBuffer if !write => {}
            _ => return None,
        }
        self.arrays.insert(name);
        Some(quote!(#id))
    }

    /// `f` over the lanes of `args`; scalars stay scalars when every argument is one.
    fn apply(&mut self, args: Vec<V>, f: impl Fn(&[TokenStream]) -> TokenStream) -> V {
        self.apply_as(false, args, f)
    }

    /// [`Self::apply`]; `truth`: `f` gives a `bool`, held in lanes as a mask word
    /// (`lanes::B`), which masks combine with directly.
    fn apply_as(
        &mut self,
        truth: bool,
        args: Vec<V>,
        f: impl Fn(&[TokenStream]) -> TokenStream,
    ) -> V {
        if args.iter().all(|a| matches!(a, V::One(_))) {
            let ts: Vec<TokenStream> = args
                .into_iter()
                .map(|a| match a {
                    V::One(t) | V::Lanes(t) | V::Run { lanes: t, .. } => t,
                })
                .collect();
            return V::One(f(&ts));
        }
        let mut binds = TokenStream::new();
        let mut uses = Vec::new();
        for (k, a) in args.into_iter().enumerate() {
            let tmp = format_ident!("__a{k}");
            match a {
                V::One(t) => {
                    binds.extend(quote!(let #tmp = #t;));
                    uses.push(quote!(#tmp));
                }
                V::Lanes(t) | V::Run { lanes: t, .. } => {
                    binds.extend(quote!(let #tmp = #t;));
                    uses.push(quote!(#tmp[__l]));
                }
            }
        }
        let mut body = f(&uses);
        if truth {
            body = quote!(__dc::cpu::lanes::B::new(#body));
        }
        V::Lanes(quote!({ #binds __dc::cpu::lanes::each(|__l| #body) }))
    }
}
