//! Which locals of a kernel split at its barriers hold the same value in every thread
//! (*group-uniform* locals), so the group body keeps one copy for the group instead of a
//! per-thread slot, assigns it once instead of once per thread, and evaluates conditions
//! and ranges built only from such values once instead of checking every thread's.
//!
//! The analysis is syntactic and conservative. A local is uniform when
//! * it is declared exactly once in the kernel (no shadowing), by a `let` that is a
//!   direct statement of a *group-level* list (the kernel's body, or the body of an `if`,
//!   `while`, `for`, `loop` or block that contains a barrier: every live thread runs such
//!   a statement, the same number of times, since the conditions around it agree), or it
//!   is the variable of a group-level `for` loop (its range is checked to agree);
//! * every assignment to it (`x = e`, `x op= e`) is also a direct statement of a
//!   group-level list, and it is never borrowed (`&mut x`);
//! * its initial value and every assigned value are uniform expressions: literals,
//!   constants, scalar parameters, other uniform locals, `group_id()`, `group_size()`,
//!   `num_groups()` (and their fields), `len()` of an array, and arithmetic, comparisons,
//!   casts and method calls on those. No load is uniform: another thread may store to the
//!   same element in between.
//!
//! Uniform locals are found by a fixed point: start from every candidate that passes the
//! first two rules, drop those whose values use a non-uniform name, until nothing changes.

use super::fission::simple_let;
use super::{compound_op, is_call_to, Binding, Tx};
use std::collections::{HashMap, HashSet};
use syn::visit::Visit;
use syn::{Expr, Pat, Stmt};

/// The result of the analysis. Names it does not know (parameters, constants, names the
/// translator makes up, such as a desugared `match`'s scrutinee) are classified by the
/// translator's binding at the point of use: a scalar parameter or an unbound constant is
/// uniform, anything else is not.
pub(super) struct Uniformity {
    /// Every name the body declares (locals, loop variables, pattern bindings).
    declared: HashSet<String>,
    /// The uniform locals.
    pub(super) locals: HashSet<String>,
}

impl Uniformity {
    /// Analyses a kernel body; `tx` is the translator's state before it (parameters bound).
    pub(super) fn of(tx: &Tx, stmts: &[Stmt]) -> Uniformity {
        let mut decls = Declarations::default();
        for s in stmts {
            decls.visit_stmt(s);
        }
        let mut group = GroupLevel::default();
        group.list(stmts);
        // Candidates: declared once, at group level, assigned only at group level.
        let mut locals: HashSet<String> = group
            .values
            .keys()
            .filter(|name| {
                decls.count.get(*name) == Some(&1)
                    && !decls.borrowed.contains(*name)
                    && decls.assignments.get(*name).copied().unwrap_or(0)
                        == group.assignments.get(*name).copied().unwrap_or(0)
            })
            .cloned()
            .collect();
        let declared = decls.count.keys().cloned().collect();
        let mut u = Uniformity {
            declared,
            locals: HashSet::new(),
        };
        loop {
            u.locals = locals.clone();
            locals.retain(|name| group.values[name].iter().all(|e| u.expr(e, tx)));
            if locals.len() == u.locals.len() {
                break;
            }
        }
        u
    }

    /// Whether `e` has the same value in every thread, given the uniform locals and the
    /// translator's bindings `tx` where `e` is.
    pub(super) fn expr(&self, e: &Expr, tx: &Tx) -> bool {
        self.built_from(e, tx, Over::Group)
    }

    /// Whether `e` is a function of the thread's ids only (`local_id()`, `global_id()`,
    /// group-wide ids, constants, scalar parameters, arithmetic): a local initialised by
    /// it and never assigned can be recomputed in each region from the thread's context
    /// instead of being stored per thread.
    pub(super) fn is_thread_id_expr(&self, e: &Expr, tx: &Tx) -> bool {
        self.built_from(e, tx, Over::Thread)
    }

    /// Whether `e` is built only from values that do not vary `over` the group or the
    /// thread. The thread form names no local at all (a uniform local may be reassigned
    /// between a region and the next, a recomputed declaration must not see that) and no
    /// method calls.
    fn built_from(&self, e: &Expr, tx: &Tx, over: Over) -> bool {
        let group = over == Over::Group;
        let sub = |e: &Expr| self.built_from(e, tx, over);
        match e {
            Expr::Lit(_) => true,
            Expr::Path(p) => match p.path.get_ident() {
                // `f32::MAX`, `u32::BITS`: constants.
                None => p.path.segments.len() > 1,
                Some(id) => {
                    let name = id.to_string();
                    (group || !self.declared.contains(&name)) && self.name(&name, tx)
                }
            },
            Expr::Binary(b) => compound_op(&b.op).is_none() && sub(&b.left) && sub(&b.right),
            Expr::Paren(p) => sub(&p.expr),
            Expr::Cast(c) => sub(&c.expr),
            Expr::Field(f) => sub(&f.base),
            Expr::Call(c) => {
                let ids: &[&str] = match over {
                    Over::Group => &["group_id", "group_size", "num_groups"],
                    Over::Thread => &[
                        "local_id",
                        "global_id",
                        "group_id",
                        "group_size",
                        "num_groups",
                    ],
                };
                c.args.is_empty() && ids.iter().any(|f| is_call_to(c, f))
            }
            Expr::Unary(u) if group => !matches!(u.op, syn::UnOp::Deref(_)) && sub(&u.expr),
            Expr::Group(g) if group => sub(&g.expr),
            // An array's length is fixed for the launch (only arrays have `len()`).
            Expr::MethodCall(m) if group && m.method == "len" && m.args.is_empty() => {
                matches!(&*m.receiver, Expr::Path(p) if p.path.get_ident().is_some())
            }
            // Methods of kernel scalars are pure.
            Expr::MethodCall(m) if group => sub(&m.receiver) && m.args.iter().all(sub),
            _ => false,
        }
    }

    fn name(&self, name: &str, tx: &Tx) -> bool {
        if self.declared.contains(name) {
            return self.locals.contains(name);
        }
        match tx.lookup(name) {
            Some(Binding::Scalar) => true,
            Some(_) => false,
            // Unbound: a constant of the surrounding module.
            None => true,
        }
    }

    /// Whether `s` is a statement the group body runs once for the group: a `let` of a
    /// uniform local, or an assignment to one.
    pub(super) fn is_group_stmt(&self, s: &Stmt) -> bool {
        match s {
            Stmt::Local(l) => {
                simple_let(l).is_some_and(|(ident, _, _)| self.locals.contains(&ident.to_string()))
            }
            Stmt::Expr(e, Some(_)) => assigned(e).is_some_and(|n| self.locals.contains(&n)),
            _ => false,
        }
    }
}

/// What a value may vary over.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Over {
    Group,
    Thread,
}

/// The local that `e` assigns (`x = ..`, `x op= ..`), and the value it assigns.
fn assignment(e: &Expr) -> Option<(String, &Expr)> {
    let (target, value) = match e {
        Expr::Assign(a) => (&*a.left, &*a.right),
        Expr::Binary(b) if compound_op(&b.op).is_some() => (&*b.left, &*b.right),
        _ => return None,
    };
    match target {
        Expr::Path(p) => Some((p.path.get_ident()?.to_string(), value)),
        _ => None,
    }
}

fn assigned(e: &Expr) -> Option<String> {
    assignment(e).map(|(n, _)| n)
}

/// Every declaration, assignment and `&mut` borrow of a name in the body.
#[derive(Default)]
struct Declarations {
    count: HashMap<String, u32>,
    assignments: HashMap<String, u32>,
    borrowed: HashSet<String>,
}

impl<'ast> Visit<'ast> for Declarations {
    fn visit_pat_ident(&mut self, p: &'ast syn::PatIdent) {
        *self.count.entry(p.ident.to_string()).or_default() += 1;
        syn::visit::visit_pat_ident(self, p);
    }
    fn visit_expr(&mut self, e: &'ast Expr) {
        if let Some(n) = assigned(e) {
            *self.assignments.entry(n).or_default() += 1;
        }
        if let Expr::Reference(r) = e {
            if let (Some(_), Expr::Path(p)) = (r.mutability, &*r.expr) {
                if let Some(id) = p.path.get_ident() {
                    self.borrowed.insert(id.to_string());
                }
            }
        }
        syn::visit::visit_expr(self, e);
    }
}

/// The direct statements of group-level lists: the values given to each local there
/// (its initial value and every assigned value), and how many assignments.
#[derive(Default)]
struct GroupLevel<'ast> {
    values: HashMap<String, Vec<&'ast Expr>>,
    assignments: HashMap<String, u32>,
    /// Variables of group-level `for` loops.
    loop_vars: HashSet<String>,
}

impl<'ast> GroupLevel<'ast> {
    fn list(&mut self, stmts: &'ast [Stmt]) {
        for s in stmts {
            match s {
                Stmt::Local(l) => {
                    let diverges = l.init.as_ref().is_some_and(|i| i.diverge.is_some());
                    if let (Some((ident, _, init)), false) = (simple_let(l), diverges) {
                        self.values.entry(ident.to_string()).or_default().push(init);
                    }
                }
                Stmt::Expr(e, _) => {
                    if let Some((n, v)) = assignment(e) {
                        *self.assignments.entry(n.clone()).or_default() += 1;
                        self.values.entry(n).or_default().push(v);
                    } else if super::fission::has_barrier_expr(e) {
                        self.group_expr(e);
                    }
                }
                _ => {}
            }
        }
        // A group-level loop's variable takes the agreed range's values: uniform, with
        // no value of its own to check (a literal stands for it).
        for v in std::mem::take(&mut self.loop_vars) {
            self.values.entry(v).or_default();
        }
    }

    fn group_expr(&mut self, e: &'ast Expr) {
        match e {
            Expr::Block(b) => self.list(&b.block.stmts),
            Expr::If(i) => {
                self.list(&i.then_branch.stmts);
                if let Some((_, e)) = &i.else_branch {
                    if super::fission::has_barrier_expr(e) {
                        self.group_expr(e);
                    }
                }
            }
            Expr::While(w) => self.list(&w.body.stmts),
            Expr::Loop(l) => self.list(&l.body.stmts),
            Expr::ForLoop(f) => {
                if let Pat::Ident(pi) = &*f.pat {
                    self.loop_vars.insert(pi.ident.to_string());
                }
                self.list(&f.body.stmts);
            }
            // `match` is desugared before splitting; its arms are not analysed.
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The uniform locals of `body`, with `rounds` a scalar parameter and `x` a buffer.
    fn uniform_locals(body: &str) -> Vec<String> {
        let mut tx = Tx::new(None);
        tx.bind("rounds", Binding::Scalar);
        tx.bind("x", Binding::ReadOnlyBuffer);
        let block: syn::Block = syn::parse_str(body).unwrap();
        let mut names: Vec<String> = Uniformity::of(&tx, &block.stmts)
            .locals
            .into_iter()
            .collect();
        names.sort();
        names
    }

    #[test]
    fn values_built_from_group_wide_names_are_uniform() {
        let got = uniform_locals(
            "{
                let l = local_id().x;
                let mut s = group_size().x / 2;
                let n = x.len() as u32 + rounds;
                let g = group_id().x % 4 + u32::MAX;
                let mut k = 0u32;
                while s > 0 {
                    barrier();
                    s /= 2;
                    k += n.min(g);
                }
                for t in 0..rounds {
                    barrier();
                }
            }",
        );
        assert_eq!(got, ["g", "k", "n", "s", "t"]);
    }

    #[test]
    fn thread_values_loads_and_guarded_assignments_are_not() {
        let got = uniform_locals(
            "{
                let l = local_id().x;
                let v = x[0];
                let mut a = 1u32;
                let mut b = 1u32;
                let mut c = 1u32;
                let d = a + l;
                let mut e = 0u32;
                let mut f = 0u32;
                let s = 3u32;
                while a < 8 {
                    barrier();
                    if l > 2 { b += 1; }
                    a *= 2;
                    c += d;
                    e = v;
                    f = b;
                }
                let s = s + 1;
                if l == 0 { barrier(); }
            }",
        );
        // `a` only: `b` is assigned under a per-thread `if`, `c` and `d` use `l`, `e` a
        // load, `f` the non-uniform `b`, and `s` is declared twice.
        assert_eq!(got, ["a"]);
    }

    #[test]
    fn a_borrowed_local_is_not_uniform() {
        let got = uniform_locals(
            "{
                let mut a = 1u32;
                barrier();
                let r = &mut a;
            }",
        );
        assert!(got.is_empty(), "{got:?}");
    }
}
