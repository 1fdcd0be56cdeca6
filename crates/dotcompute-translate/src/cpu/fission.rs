//! The CPU's group body: a kernel with barriers split at them (loop fission, as pocl's
//! work-group functions), so a group runs as loops over its threads instead of one
//! coroutine per thread. `dotcompute_cpu::fission` is the runtime half and documents the
//! semantics.
//!
//! The walk mirrors the translator's own: statements without a barrier are translated by
//! it unchanged (the native half of each pair) and grouped into *regions*, each run as
//! `for __th in 0..__n { closure }`. Statements that contain a barrier are walked here:
//! a barrier becomes a check between regions; `if`, `for`, `while`, `loop`, blocks and
//! `match` containing one run once for the group, with their condition or range evaluated
//! by every thread and required to agree. Locals declared at the top level of a statement
//! list that contains barriers outlive their region, so each gets a per-thread `Slots`:
//! copied into a `let mut` at the start of every region that names it and back at its end
//! (local arrays are indexed in their slot in place; shared arrays are declared once for
//! the group).
//!
//! The walk visits statements in the same order as the translator, starting from a clone
//! of its state before the body, so barrier sites, shared and local array slots and
//! desugared `match` names agree with the per-thread body. Whatever it cannot place (a
//! barrier inside an expression, a `break` inside a condition) makes it give up, and the
//! kernel keeps its coroutines.

use super::uniform::Uniformity;
use super::{is_call_to, Tx};
use proc_macro2::{TokenStream, TokenTree};
use quote::{format_ident, quote, ToTokens};
use std::collections::{HashMap, HashSet};
use syn::visit::Visit;
use syn::{Expr, Pat, RangeLimits, Stmt};

/// A name that a later region may need.
struct Lifted {
    name: String,
    ident: syn::Ident,
    kind: Kind,
}

enum Kind {
    /// A scalar or vector local, copied in and out of its slot.
    Value { slot: syn::Ident, mutable: bool },
    /// A local array, indexed in its slot (`index`: its number in `Kernel::local_arrays`).
    Array { slot: syn::Ident, index: usize },
    /// A group-level name (a `for` loop's variable, a shared array, a group-uniform
    /// local): no slot, but it hides earlier names.
    GroupVar,
    /// An immutable local computed from the thread's ids only: its declaration (native
    /// code) is repeated in each region that names it, which is cheaper than a slot and
    /// lets the compiler see, say, that `local_id().x` is the loop's counter.
    /// `local_x`: the local is exactly `local_id().x`; `stmt`: the declaration (for
    /// lane form).
    Recomputed {
        decl: TokenStream,
        local_x: bool,
        stmt: Box<Stmt>,
    },
}

struct Splitter {
    tx: Tx,
    /// Lifted names per group-level statement list, outermost first.
    lifted: Vec<Vec<Lifted>>,
    /// Every slot and its constructor, declared at the top of the group body.
    slots: Vec<(syn::Ident, TokenStream)>,
    /// Group-level loops around the current point.
    loops: u32,
    /// Whether the kernel has a `return`: without one every thread stays alive and the
    /// loops over threads need not check.
    may_return: bool,
    /// The locals that hold the same value in every thread: one copy for the group.
    uniform: Uniformity,
    /// Regions emitted with a lane form as well.
    lane_regions: usize,
}

/// The group body of a kernel whose own body is `stmts`, translated from `tx` (the
/// translator's state just before the body), or `None` where the body cannot be split.
/// Also returns how many of its regions have a lane form.
pub(crate) fn group_body(tx: Tx, stmts: &[Stmt]) -> Option<(TokenStream, usize)> {
    let mut finder = Finder::default();
    for st in stmts {
        finder.visit_stmt(st);
    }
    let uniform = Uniformity::of(&tx, stmts);
    let mut s = Splitter {
        tx,
        lifted: Vec::new(),
        slots: Vec::new(),
        loops: 0,
        may_return: finder.ret,
        uniform,
        lane_regions: 0,
    };
    s.tx.top_level = true;
    let body = s.list(stmts, true, false)?;
    if !s.tx.errors.is_empty() {
        return None;
    }
    let (slots, makes): (Vec<_>, Vec<_>) = s.slots.into_iter().unzip();
    let body = quote! {
        #[allow(unused_macros)]
        macro_rules! __dc_assume_in_bounds { ($i:ident) => {}; }
        let __n = __g.threads();
        let mut __alive = __dc::cpu::Alive::new(__n);
        #( let mut #slots = #makes; )*
        // Shared arrays are declared once for the group, through thread 0's context.
        let __ctx = &__g.ctx(0);
        #body
    };
    Some((body, s.lane_regions))
}

impl Splitter {
    /// A statement list in which some statement contains a barrier. `top`: the kernel's
    /// own body; `loop_tail`: the list ends a group-level loop's body, so a `continue` in
    /// its last region is the same as running on.
    fn list(&mut self, stmts: &[Stmt], top: bool, loop_tail: bool) -> Option<TokenStream> {
        self.lifted.push(Vec::new());
        if !top {
            self.tx.scopes.push(HashMap::new());
        }
        let mut out = TokenStream::new();
        let mut pending: Vec<&Stmt> = Vec::new();
        for (k, s) in stmts.iter().enumerate() {
            match s {
                // Items are visible in their whole block: stated once, at group level.
                Stmt::Item(syn::Item::Const(c)) => out.extend(c.to_token_stream()),
                // A shared array is the group's: declared once, between the regions.
                Stmt::Local(l)
                    if top && simple_let(l).is_some_and(|(_, _, i)| is_shared_decl(i)) =>
                {
                    out.extend(self.tx.stmt(s).1);
                    self.group_var(l)?;
                }
                // A group-uniform local's declaration or assignment: once, between the
                // regions (a plain local of the group body, seen by later regions).
                s if self.uniform.is_group_stmt(s) => {
                    out.extend(self.flush(&mut pending, top, false, &stmts[k..])?);
                    out.extend(self.tx.stmt(s).1);
                    if let Stmt::Local(l) = s {
                        self.group_var(l)?;
                    }
                }
                s if !has_barrier(s) => pending.push(s),
                s => {
                    out.extend(self.flush(&mut pending, top, false, &stmts[k..])?);
                    let last = k + 1 == stmts.len();
                    out.extend(self.group_stmt(s, loop_tail && last)?);
                }
            }
        }
        out.extend(self.flush(&mut pending, top, loop_tail, &[])?);
        if !top {
            self.tx.scopes.pop();
        }
        self.lifted.pop();
        Some(out)
    }

    /// The barrier-free statements gathered so far, as one region (nothing when there
    /// are none); `later`: the rest of the statement list.
    fn flush(
        &mut self,
        pending: &mut Vec<&Stmt>,
        top: bool,
        loop_tail: bool,
        later: &[Stmt],
    ) -> Option<TokenStream> {
        if pending.is_empty() {
            return Some(TokenStream::new());
        }
        let r = self.region(pending, top, loop_tail, later);
        pending.clear();
        r
    }

    /// Names the local that `l` declares at group level (no slot).
    fn group_var(&mut self, l: &syn::Local) -> Option<()> {
        let ident = simple_let(l)?.0.clone();
        self.lifted.last_mut()?.push(Lifted {
            name: ident.to_string(),
            ident,
            kind: Kind::GroupVar,
        });
        Some(())
    }

    /// A statement that contains a barrier.
    fn group_stmt(&mut self, s: &Stmt, loop_tail: bool) -> Option<TokenStream> {
        let Stmt::Expr(e, _) = s else { return None };
        let was_top = std::mem::replace(&mut self.tx.top_level, false);
        let r = self.group_expr(e, loop_tail);
        self.tx.top_level = was_top;
        r
    }

    fn group_expr(&mut self, e: &Expr, loop_tail: bool) -> Option<TokenStream> {
        match e {
            Expr::Call(c) if is_call_to(c, "barrier") && c.args.is_empty() => {
                self.tx.barrier_sites += 1;
                let site = self.tx.barrier_site();
                Some(quote!(if __alive.barrier(__g, #site) { return; }))
            }
            Expr::Block(b) if b.label.is_none() && b.attrs.is_empty() => {
                let inner = self.list(&b.block.stmts, false, loop_tail)?;
                Some(quote!({ #inner }))
            }
            Expr::Match(m) => match self.tx.desugar_match(m, false)? {
                Expr::Block(b) => {
                    let inner = self.list(&b.block.stmts, false, loop_tail)?;
                    Some(quote!({ #inner }))
                }
                _ => None,
            },
            Expr::If(i) => self.group_if(i, loop_tail),
            Expr::ForLoop(f) => self.group_for(f),
            Expr::While(w) => {
                if w.label.is_some() || matches!(&*w.cond, Expr::Let(_)) || has_flow(&w.cond) {
                    return None;
                }
                let cond = self.uniform(
                    &[&*w.cond],
                    "the condition of a `while` loop containing barrier()",
                );
                let body = self.group_loop_body(&w.body.stmts, None)?;
                let stop = super::poll_stop();
                Some(quote!(loop { #stop let (__c,): (bool,) = #cond; if !__c { break; } #body }))
            }
            Expr::Loop(l) => {
                if l.label.is_some() {
                    return None;
                }
                let body = self.group_loop_body(&l.body.stmts, None)?;
                let stop = super::poll_stop();
                Some(quote!(loop { #stop #body }))
            }
            _ => None,
        }
    }

    fn group_if(&mut self, i: &syn::ExprIf, loop_tail: bool) -> Option<TokenStream> {
        if matches!(&*i.cond, Expr::Let(_)) || has_flow(&i.cond) {
            return None;
        }
        let cond = self.uniform(&[&*i.cond], "the condition of an `if` containing barrier()");
        let then = self.list(&i.then_branch.stmts, false, loop_tail)?;
        let els = match &i.else_branch {
            None => quote!(),
            Some((_, e)) => match &**e {
                Expr::If(inner) if has_barrier_expr(e) => {
                    let inner = self.group_if(inner, loop_tail)?;
                    quote!(else { #inner })
                }
                Expr::If(_) => {
                    // A barrier-free `else if`: one region.
                    let stmt = Stmt::Expr((**e).clone(), None);
                    self.lifted.push(Vec::new());
                    let r = self.region(&[&stmt], false, loop_tail, &[]);
                    self.lifted.pop();
                    let r = r?;
                    quote!(else { #r })
                }
                Expr::Block(b) => {
                    let inner = self.list(&b.block.stmts, false, loop_tail)?;
                    quote!(else { #inner })
                }
                _ => return None,
            },
        };
        Some(quote!({ let (__c,): (bool,) = #cond; if __c { #then } #els }))
    }

    fn group_for(&mut self, f: &syn::ExprForLoop) -> Option<TokenStream> {
        if f.label.is_some() {
            return None;
        }
        let Pat::Ident(pi) = &*f.pat else { return None };
        let (range, step) = super::for_range(&f.expr).ok()?;
        let (Some(start), Some(end), RangeLimits::HalfOpen(_)) =
            (&range.start, &range.end, &range.limits)
        else {
            return None;
        };
        let mut sources: Vec<&Expr> = vec![start, end];
        sources.extend(step);
        if sources.iter().any(|e| has_flow(e)) {
            return None;
        }
        // Translated in the translator's order: start, end, step.
        let mut values = vec![self.tx.expr(start).1, self.tx.expr(end).1];
        if let Some(st) = step {
            values.push(self.tx.step_arg(st).1);
        }
        let what = "the range of a `for` loop containing barrier()";
        let var = &pi.ident;
        let r = self.uniform_values(&sources, values, what);
        let header = match step {
            None => quote!(let (__s, __e) = #r; for #var in __s..__e),
            Some(_) => quote!(
                let (__s, __e, __st) = #r;
                for #var in __dc::ops::step_range(__s, __e, __st)
            ),
        };
        self.tx.scopes.push(HashMap::new());
        self.tx.bind(&var.to_string(), super::Binding::Local);
        let body = self.group_loop_body(&f.body.stmts, Some(var.clone()));
        self.tx.scopes.pop();
        let body = body?;
        let stop = super::poll_stop();
        Some(quote!({ #header { #stop #body } }))
    }

    /// The body of a group-level loop; `var` is a `for` loop's variable.
    fn group_loop_body(&mut self, stmts: &[Stmt], var: Option<syn::Ident>) -> Option<TokenStream> {
        self.lifted.push(
            var.into_iter()
                .map(|v| Lifted {
                    name: v.to_string(),
                    ident: v,
                    kind: Kind::GroupVar,
                })
                .collect(),
        );
        self.loops += 1;
        let body = self.list(stmts, false, true);
        self.loops -= 1;
        self.lifted.pop();
        body
    }

    /// A tuple of values every live thread computes, which must agree: `(a,)`, `(a, b)`.
    fn uniform(&mut self, exprs: &[&Expr], what: &str) -> TokenStream {
        let values = exprs.iter().map(|e| self.tx.expr(e).1).collect();
        self.uniform_values(exprs, values, what)
    }

    /// As [`Splitter::uniform`], from the values' native code; `sources` are the
    /// expressions they were translated from (for the lifted names they use).
    fn uniform_values(
        &mut self,
        sources: &[&Expr],
        values: Vec<TokenStream>,
        what: &str,
    ) -> TokenStream {
        // Built from group-uniform values only: computed once, by thread 0's context.
        if sources.iter().all(|e| self.uniform.expr(e, &self.tx)) {
            return quote!((#(#values,)*));
        }
        let names = names_in(sources.iter().map(|e| e.to_token_stream()));
        let (rebinds, _, used) = self.rebinds(&names, false);
        let alive = if self.may_return {
            quote!(::core::option::Option::Some(&__alive))
        } else {
            quote!(::core::option::Option::None)
        };
        quote!({
            #( #used.for_threads(__n); )*
            let __agreed = __g.agree(#alive, #what, |__th| {
                let __ctx = &__g.ctx(__th);
                #rebinds
                (#(#values,)*)
            });
            match __agreed {
                ::core::option::Option::Some(__v) => __v,
                ::core::option::Option::None => return,
            }
        })
    }

    /// Barrier-free statements, run by every live thread in turn. `later`: the rest of
    /// the statement list, where the region's locals may be used (those it does not name
    /// stay plain locals of the region).
    fn region(
        &mut self,
        stmts: &[&Stmt],
        top: bool,
        loop_tail: bool,
        later: &[Stmt],
    ) -> Option<TokenStream> {
        let names = names_in(stmts.iter().map(|s| s.to_token_stream()));
        let needed_later = names_in(later.iter().map(|s| s.to_token_stream()));
        let (rebinds, stores, mut used) = self.rebinds(&names, true);
        let first_new = self.lifted.last().map_or(0, Vec::len);
        let body = self.region_statements(stmts, top, &needed_later, &mut used)?;
        // Locals declared here are stored when the region runs to its end; a thread that
        // leaves it early (`break`/`continue` of the loop around it, `return`) leaves
        // their scope too.
        let mut new_stores = TokenStream::new();
        for (l, slot) in self.declared_values(first_new) {
            let id = &l.ident;
            new_stores.extend(quote!(#slot.set(__th, #id);));
        }
        let exit = self.region_exit(stmts, loop_tail);
        let range = self.thread_range(stmts);
        // Lane form for the group's whole chunks (those holding a thread of the range,
        // where the region runs a range of threads).
        let lanes = match exit.is_empty() && !self.may_return {
            true => self.lane_region(stmts, &names, first_new),
            false => None,
        };
        self.lane_regions += usize::from(lanes.is_some());
        let skip_dead = self.skip_dead();
        let (note, begin) = if self.may_return || !exit.is_empty() {
            (
                quote!(__alive.note(__th, __flow);),
                quote!(__alive.begin_region();),
            )
        } else {
            (quote!(let _ = __flow;), quote!())
        };
        let thread_loop = |threads: TokenStream| {
            quote! {
                #begin
                #( #used.for_threads(__n); )*
                for __th in #threads {
                    #skip_dead
                    let __ctx = &__g.ctx(__th);
                    let __flow: __dc::cpu::Flow = (|| {
                        #rebinds
                        let __flow: __dc::cpu::Flow = (|| {
                            #body
                            #new_stores
                            __dc::cpu::Flow::Next
                        })();
                        #stores
                        __flow
                    })();
                    #note
                }
                #exit
            }
        };
        Some(match (lanes, range) {
            (Some(lanes), range) => lanes_then_threads(lanes, range, &used, thread_loop),
            (None, Some(range)) => thread_loop(range),
            (None, None) => thread_loop(quote!(0..__n)),
        })
    }

    /// The region's statements translated, with the locals that later statements use
    /// lifted into per-thread slots (their slots added to `used`).
    fn region_statements(
        &mut self,
        stmts: &[&Stmt],
        top: bool,
        needed_later: &HashSet<String>,
        used: &mut Vec<syn::Ident>,
    ) -> Option<TokenStream> {
        let mut body = TokenStream::new();
        let was_top = std::mem::replace(&mut self.tx.top_level, top);
        let was_region = self.tx.region.replace(0);
        for s in stmts {
            let Stmt::Local(l) = s else {
                body.extend(self.tx.stmt(s).1);
                continue;
            };
            let Some((ident, mutable, init)) =
                simple_let(l).filter(|(ident, _, _)| needed_later.contains(&ident.to_string()))
            else {
                body.extend(self.tx.stmt(s).1);
                continue;
            };
            let name = ident.to_string();
            let kind = if let Expr::Repeat(rep) = init {
                let len = &rep.len;
                let slot = self.new_slot(
                    &name,
                    quote!(__dc::cpu::ArraySlots::new(__n, (#len) as usize)),
                );
                let index = self.tx.local_arrays;
                self.tx.lift_array = Some(slot.clone());
                body.extend(self.tx.stmt(s).1);
                self.tx.lift_array = None;
                used.push(slot.clone());
                Kind::Array { slot, index }
            } else if !mutable && self.uniform.is_thread_id_expr(init, &self.tx) {
                let decl = self.tx.stmt(s).1;
                body.extend(decl.clone());
                Kind::Recomputed {
                    decl,
                    local_x: is_local_x(init),
                    stmt: Box::new((*s).clone()),
                }
            } else {
                body.extend(self.tx.stmt(s).1);
                let slot = self.new_slot(&name, quote!(__dc::cpu::Slots::new(__n)));
                used.push(slot.clone());
                Kind::Value { slot, mutable }
            };
            self.lifted.last_mut()?.push(Lifted {
                name,
                ident: ident.clone(),
                kind,
            });
        }
        self.tx.top_level = was_top;
        self.tx.region = was_region;
        Some(body)
    }

    /// What a region ends with where it holds a `break`, `continue` or `return` of the
    /// loop around it: the group's threads agree on the way out.
    fn region_exit(&self, stmts: &[&Stmt], loop_tail: bool) -> TokenStream {
        if self.loops > 0 && has_loop_exit(stmts) {
            quote! {
                match __alive.exit(__g, #loop_tail) {
                    __dc::cpu::Exit::Next => {}
                    __dc::cpu::Exit::Break => break,
                    __dc::cpu::Exit::Continue => continue,
                    __dc::cpu::Exit::Stop => return,
                }
            }
        } else {
            quote!()
        }
    }

    /// The region `stmts` (already translated) in lane form (`lanes.rs`) for the chunks
    /// `__chunks` of a group that `lanes::fits`, or `None` where lane form does
    /// not take it: a `break` or `continue` in it, a local array, or a construct lane
    /// form lacks. Called only for kernels without `return`. `names`: the names it
    /// uses; `first_new`: the first of the lifted names it declares.
    fn lane_region(
        &self,
        stmts: &[&Stmt],
        names: &HashSet<String>,
        first_new: usize,
    ) -> Option<TokenStream> {
        // A `break` / `continue` of a loop inside the region (`return` is excluded by the
        // caller: the kernel has none).
        if has_loop_exit(stmts) {
            return None;
        }
        let mut rebinds = TokenStream::new();
        let mut stores = TokenStream::new();
        let mut lane_locals = Vec::new();
        // The names visible where the region starts (not those it declares itself).
        for l in self.visible(names, Some(first_new)) {
            let id = &l.ident;
            match &l.kind {
                Kind::Value { slot, mutable } => {
                    rebinds.extend(quote!(let mut #id = #slot.get_lanes(__c0);));
                    let held = match mutable {
                        // It may become a run in the region (`j = lid;`): tracked from
                        // here, as not one.
                        true => {
                            let base = format_ident!("__run_{}", l.name);
                            let ok = format_ident!("__ok_{}", l.name);
                            rebinds.extend(quote!(let mut #base = #id[0]; let mut #ok = false;));
                            stores.extend(quote!(#slot.set_lanes(__c0, #id);));
                            super::lanes::Held::Run { base, ok: Some(ok) }
                        }
                        false => super::lanes::Held::Lanes,
                    };
                    lane_locals.push((l.name.clone(), held));
                }
                Kind::Recomputed { stmt, .. } => {
                    let (decl, lanes) = super::lanes::recomputed(&self.tx, stmt)?;
                    rebinds.extend(decl);
                    lane_locals.push((l.name.clone(), lanes));
                }
                Kind::Array { .. } => return None,
                Kind::GroupVar => continue,
            }
        }
        let (body, declared, arrays) = super::lanes::region(&self.tx, &lane_locals, stmts)?;
        // Each array's view copied into the region: its pointer and length stay in
        // registers (through the captured view they are reloaded after every access,
        // since the out-of-bounds path is a call).
        let arrays = arrays.iter().map(|a| format_ident!("{a}"));
        // Locals the region declares that later regions need (a local array it declares
        // has already made `lanes::region` answer `None`).
        for (l, slot) in self.declared_values(first_new) {
            let id = &l.ident;
            stores.extend(match declared.get(&l.name) {
                Some(false) => quote!(#slot.set_lanes(__c0, __dc::cpu::lanes::splat(#id));),
                _ => quote!(#slot.set_lanes(__c0, #id);),
            });
        }
        Some(quote! {
            __dc::cpu::lanes::apart(|| {
                #( let #arrays = #arrays; )*
                let mut __chunks = __chunks;
                // Lane code takes from a thread's context only what is the same for the
                // whole group (`group_id()`, `group_size()`, `num_groups()`): thread 0's,
                // once, not a context per chunk (whose table lookup is checked).
                let __ctx = &__g.ctx(0);
                while let ::core::option::Option::Some((__c0, __ids)) = __chunks.next_chunk() {
                    // Every lane is a thread of the group: whole chunks only.
                    let __m: __dc::cpu::lanes::Mask = __dc::cpu::lanes::ALL;
                    #rebinds
                    #body
                    #stores
                }
            });
        })
    }

    /// The threads a region runs: all of them (`0..__n`), except where the region is one
    /// `if` (no `else`, no `break` / `continue` / `return`) whose condition compares the
    /// thread's `local_id().x` with a group-uniform name or literal, as a tree
    /// reduction's step `if lid < s { .. }` does. Then only the threads for which it can
    /// hold run: in a one-dimensional group `local_id().x` is the thread's number, so
    /// `lid < s` is the range `0..s`. The condition stays in the body; the range only
    /// skips threads that would find it false. Other groups run every thread.
    fn thread_range(&self, stmts: &[&Stmt]) -> Option<TokenStream> {
        let [Stmt::Expr(e @ Expr::If(i), _)] = stmts else {
            return None;
        };
        if i.else_branch.is_some() || has_flow(e) {
            return None;
        }
        let Expr::Binary(b) = &*i.cond else {
            return None;
        };
        use syn::BinOp::{Eq, Ge, Gt, Le, Lt};
        // `lid OP u`, or `u OP lid` turned around.
        let (op, bound) = match (self.is_local_x(&b.left), self.is_local_x(&b.right)) {
            (true, false) => (b.op, &*b.right),
            (false, true) => match b.op {
                Lt(t) => (Gt(syn::Token![>](t.span)), &*b.left),
                Le(t) => (Ge(syn::Token![>=](t.spans)), &*b.left),
                Gt(t) => (Lt(syn::Token![<](t.span)), &*b.left),
                Ge(t) => (Le(syn::Token![<=](t.spans)), &*b.left),
                op => (op, &*b.left),
            },
            _ => return None,
        };
        let simple = match bound {
            Expr::Path(p) => p.path.get_ident().is_some(),
            Expr::Lit(l) => matches!(l.lit, syn::Lit::Int(_)),
            _ => false,
        };
        if !simple || !self.uniform.expr(bound, &self.tx) {
            return None;
        }
        let (lo, hi) = match op {
            Lt(_) => (quote!(0), quote!(__u)),
            Le(_) => (quote!(0), quote!(__u.saturating_add(1))),
            Eq(_) => (quote!(__u), quote!(__u.saturating_add(1))),
            Ge(_) => (quote!(__u), quote!(__n)),
            Gt(_) => (quote!(__u.saturating_add(1)), quote!(__n)),
            _ => return None,
        };
        Some(quote!({
            let (__lo, __hi): (usize, usize) = if __g.one_dimensional() {
                // A bound of the thread's `local_id().x`, a u32 as the comparison needs.
                let __u = (#bound) as usize;
                let __hi: usize = #hi;
                (::core::cmp::min(#lo, __n), ::core::cmp::min(__hi, __n))
            } else {
                (0, __n)
            };
            __lo..__hi
        }))
    }

    /// Whether `e` is `local_id().x`, or names a local that is exactly that.
    fn is_local_x(&self, e: &Expr) -> bool {
        if is_local_x(e) {
            return true;
        }
        let Expr::Path(p) = e else { return false };
        let Some(id) = p.path.get_ident() else {
            return false;
        };
        let name = id.to_string();
        let visible = self.lifted.iter().flatten().rev().find(|l| l.name == name);
        matches!(
            visible.map(|l| &l.kind),
            Some(Kind::Recomputed { local_x: true, .. })
        )
    }

    /// The check that skips threads that have returned, where the kernel can return.
    fn skip_dead(&self) -> TokenStream {
        if self.may_return {
            quote!(if !__alive.is(__th) {
                continue;
            })
        } else {
            quote!()
        }
    }

    /// Statements that bring the lifted names in `names` into a region or an expression
    /// (the visible declaration of each), and, for a region, store the mutable values
    /// back.
    /// Also returns the slots they use.
    fn rebinds(
        &self,
        names: &HashSet<String>,
        region: bool,
    ) -> (TokenStream, TokenStream, Vec<syn::Ident>) {
        let mut rebinds = TokenStream::new();
        let mut stores = TokenStream::new();
        let mut used = Vec::new();
        for l in self.visible(names, None) {
            let id = &l.ident;
            match &l.kind {
                Kind::Value { slot, mutable } => {
                    used.push(slot.clone());
                    rebinds.extend(quote!(let mut #id = #slot.get(__th);));
                    if *mutable && region {
                        stores.extend(quote!(#slot.set(__th, #id);));
                    }
                }
                Kind::Array { slot, index } => {
                    used.push(slot.clone());
                    rebinds
                        .extend(quote!(let #id = __ctx.local_array(#slot.get_mut(__th), #index);));
                }
                Kind::Recomputed { decl, .. } => rebinds.extend(decl.clone()),
                Kind::GroupVar => {}
            }
        }
        (rebinds, stores, used)
    }

    /// The scalar and vector locals the region starting at `first_new` of the innermost
    /// level declares for later regions (the last declaration of each name), with their
    /// slots.
    fn declared_values(&self, first_new: usize) -> Vec<(&Lifted, &syn::Ident)> {
        let Some(level) = self.lifted.last() else {
            return Vec::new();
        };
        level
            .iter()
            .enumerate()
            .skip(first_new)
            .filter(|(k, l)| !level[k + 1..].iter().any(|m| m.name == l.name))
            .filter_map(|(_, l)| match &l.kind {
                Kind::Value { slot, .. } => Some((l, slot)),
                _ => None,
            })
            .collect()
    }

    /// The lifted names among `names`, each its last (visible) declaration; with
    /// `first_new`, as a region that starts at that index of the innermost level sees
    /// them (not the names it declares itself).
    fn visible(&self, names: &HashSet<String>, first_new: Option<usize>) -> Vec<&Lifted> {
        let levels = self.lifted.len();
        let all: Vec<&Lifted> = self
            .lifted
            .iter()
            .enumerate()
            .flat_map(|(k, level)| match (k + 1 == levels, first_new) {
                (true, Some(n)) => &level[..n],
                _ => &level[..],
            })
            .collect();
        all.iter()
            .enumerate()
            .filter(|(k, l)| {
                names.contains(&l.name) && !all[k + 1..].iter().any(|m| m.name == l.name)
            })
            .map(|(_, l)| *l)
            .collect()
    }

    /// A slot, made by `make` at the top of the group body.
    fn new_slot(&mut self, name: &str, make: TokenStream) -> syn::Ident {
        let slot = format_ident!("__dc_lift_{}_{}", self.slots.len(), name);
        self.slots.push((slot.clone(), make));
        slot
    }
}

/// `let [mut] name [: T] = init;`
pub(super) fn simple_let(l: &syn::Local) -> Option<(&syn::Ident, bool, &Expr)> {
    let pat = match &l.pat {
        Pat::Type(pt) => &*pt.pat,
        p => p,
    };
    let Pat::Ident(pi) = pat else { return None };
    let init = l.init.as_ref()?;
    Some((&pi.ident, pi.mutability.is_some(), &init.expr))
}

/// `local_id().x`.
fn is_local_x(e: &Expr) -> bool {
    let Expr::Field(f) = e else { return false };
    let Expr::Call(c) = &*f.base else {
        return false;
    };
    c.args.is_empty()
        && is_call_to(c, "local_id")
        && matches!(&f.member, syn::Member::Named(m) if m == "x")
}

fn is_shared_decl(init: &Expr) -> bool {
    let Expr::Call(call) = init else { return false };
    let Expr::Path(p) = &*call.func else {
        return false;
    };
    p.path
        .segments
        .last()
        .is_some_and(|s| s.ident == "shared" || s.ident == "shared_dynamic")
}

/// Every identifier in the token streams (a superset of the locals they name).
pub(super) fn names_in(streams: impl Iterator<Item = TokenStream>) -> HashSet<String> {
    fn walk(ts: TokenStream, out: &mut HashSet<String>) {
        for t in ts {
            match t {
                TokenTree::Ident(i) => {
                    out.insert(i.to_string());
                }
                TokenTree::Group(g) => walk(g.stream(), out),
                _ => {}
            }
        }
    }
    let mut out = HashSet::new();
    for s in streams {
        walk(s, &mut out);
    }
    out
}

/// Finds `barrier()` calls, `break` / `continue` / `return`, and loops.
#[derive(Default)]
struct Finder {
    barrier: bool,
    loop_exit: bool,
    ret: bool,
    a_loop: bool,
}

impl<'ast> Visit<'ast> for Finder {
    fn visit_expr_call(&mut self, c: &'ast syn::ExprCall) {
        if is_call_to(c, "barrier") {
            self.barrier = true;
        }
        syn::visit::visit_expr_call(self, c);
    }
    fn visit_expr_break(&mut self, b: &'ast syn::ExprBreak) {
        self.loop_exit = true;
        syn::visit::visit_expr_break(self, b);
    }
    fn visit_expr_continue(&mut self, c: &'ast syn::ExprContinue) {
        self.loop_exit = true;
        syn::visit::visit_expr_continue(self, c);
    }
    fn visit_expr_return(&mut self, r: &'ast syn::ExprReturn) {
        self.ret = true;
        syn::visit::visit_expr_return(self, r);
    }
    fn visit_expr_for_loop(&mut self, l: &'ast syn::ExprForLoop) {
        self.a_loop = true;
        syn::visit::visit_expr_for_loop(self, l);
    }
    fn visit_expr_while(&mut self, w: &'ast syn::ExprWhile) {
        self.a_loop = true;
        syn::visit::visit_expr_while(self, w);
    }
    fn visit_expr_loop(&mut self, l: &'ast syn::ExprLoop) {
        self.a_loop = true;
        syn::visit::visit_expr_loop(self, l);
    }
}

fn has_barrier(s: &Stmt) -> bool {
    let mut f = Finder::default();
    f.visit_stmt(s);
    f.barrier
}

pub(super) fn has_barrier_expr(e: &Expr) -> bool {
    let mut f = Finder::default();
    f.visit_expr(e);
    f.barrier
}

fn has_loop_exit(stmts: &[&Stmt]) -> bool {
    let mut f = Finder::default();
    for s in stmts {
        f.visit_stmt(s);
    }
    f.loop_exit
}

/// Whether the statements hold a loop.
pub(super) fn has_loop(stmts: &[Stmt]) -> bool {
    let mut f = Finder::default();
    for s in stmts {
        f.visit_stmt(s);
    }
    f.a_loop
}

/// Whether `e` can leave its surroundings (`break`, `continue`, `return`).
fn has_flow(e: &Expr) -> bool {
    let mut f = Finder::default();
    f.visit_expr(e);
    f.loop_exit || f.ret
}

/// A region in lane form for the group's whole chunks, then its other threads one by one
/// (`range`: the threads the region runs, where it runs a range; the whole chunks that
/// hold one of them run, their other lanes finding the region's condition false).
fn lanes_then_threads(
    lanes: TokenStream,
    range: Option<TokenStream>,
    used: &[syn::Ident],
    thread_loop: impl Fn(TokenStream) -> TokenStream,
) -> TokenStream {
    match range {
        None => {
            let rest = thread_loop(quote!(__full..__n));
            let all = thread_loop(quote!(0..__n));
            quote! {
                if __dc::cpu::lanes::enabled() && __dc::cpu::lanes::fits(__g) {
                    let __full = __n - __n % __dc::cpu::lanes::LANES;
                    let __chunks = __dc::cpu::lanes::Chunks::new(__g);
                    #( #used.for_threads(__n); )*
                    #lanes
                    // The threads of a last, partial chunk.
                    #rest
                } else {
                    #all
                }
            }
        }
        Some(range) => {
            // The whole chunks that hold a thread of `__lo..__hi` (their other
            // lanes find the region's condition false), then its threads past them.
            let rest = thread_loop(quote!(::core::cmp::max(__lo, __end)..__hi));
            let all = thread_loop(quote!(__lo..__hi));
            quote! {
                let ::core::ops::Range { start: __lo, end: __hi } = #range;
                if __dc::cpu::lanes::enabled() && __dc::cpu::lanes::fits(__g) {
                    let __full = __n - __n % __dc::cpu::lanes::LANES;
                    let __end = ::core::cmp::min(
                        __hi.next_multiple_of(__dc::cpu::lanes::LANES),
                        __full,
                    );
                    let __chunks = __dc::cpu::lanes::Chunks::between(
                        __g,
                        __lo - __lo % __dc::cpu::lanes::LANES,
                        __end,
                    );
                    #( #used.for_threads(__n); )*
                    #lanes
                    #rest
                } else {
                    #all
                }
            }
        }
    }
}
