//! Lane form of expressions: values that are the same for every lane stay scalars;
//! others become `[T; LANES]` through one closure per operation.

use super::*;

impl<'t> Emitter<'t> {
    pub(super) fn expr(&mut self, e: &Expr) -> Option<V> {
        match e {
            Expr::Lit(l) => match &l.lit {
                syn::Lit::Int(_) | syn::Lit::Float(_) | syn::Lit::Bool(_) => {
                    Some(V::One(l.to_token_stream()))
                }
                _ => None,
            },
            Expr::Paren(p) => self.expr(&p.expr),
            Expr::Group(g) => self.expr(&g.expr),
            Expr::Path(p) => {
                if let Some(id) = p.path.get_ident() {
                    match self.held(&id.to_string()) {
                        Some(Held::Lanes) => return Some(V::Lanes(quote!(#id))),
                        Some(Held::Scalar) => return Some(V::One(quote!(#id))),
                        Some(Held::Run { base, ok }) => {
                            return Some(V::Run {
                                lanes: quote!(#id),
                                base: quote!(#base),
                                ok: ok.as_ref().map(|o| quote!(#o)),
                            })
                        }
                        None => {}
                    }
                    match self.tx.lookup(&id.to_string()) {
                        Some(Binding::Local | Binding::GidX | Binding::Scalar) | None => {}
                        Some(_) => return None,
                    }
                }
                Some(V::One(quote!(#p)))
            }
            Expr::Binary(b) => self.binary(b),
            Expr::Unary(u) => {
                let v = self.expr(&u.expr)?;
                match u.op {
                    UnOp::Neg(_) if matches!(&*u.expr, Expr::Lit(_)) => {
                        Some(self.apply(vec![v], |a| {
                            let a = &a[0];
                            quote!((-#a))
                        }))
                    }
                    UnOp::Neg(_) => Some(self.apply(vec![v], |a| {
                        let a = &a[0];
                        quote!(__dc::ops::neg(#a))
                    })),
                    UnOp::Not(_) => Some(self.apply(vec![v], |a| {
                        let a = &a[0];
                        quote!((!#a))
                    })),
                    _ => None,
                }
            }
            Expr::Cast(c) => {
                let t = scalar_type(&c.ty)?;
                let v = self.expr(&c.expr)?;
                let to_bool = t.to_string() == "bool";
                Some(self.apply_as(to_bool, vec![v], |a| {
                    let a = &a[0];
                    quote!(__dc::ops::cast::<#t, _>(#a))
                }))
            }
            Expr::Index(ix) => {
                let mem = self.array(&ix.expr, false)?;
                let v = self.expr(&ix.index)?;
                if let Some(load) = self.unchecked_load(&mem, &ix.index, &v) {
                    return Some(load);
                }
                Some(match v {
                    V::One(i) => V::One(quote!(__dc::cpu::lanes::load_one(&#mem, &__m, #i))),
                    v => {
                        let (idx, load, _) = lane_access(&mem, v);
                        V::Lanes(quote!({ let __i = #idx; #load }))
                    }
                })
            }
            Expr::MethodCall(m) => self.method(m),
            Expr::Field(f) => self.builtin(f),
            Expr::If(i) => self.if_value(i),
            _ => None,
        }
    }

    pub(super) fn binary(&mut self, b: &syn::ExprBinary) -> Option<V> {
        if matches!(b.op, BinOp::And(_) | BinOp::Or(_)) {
            return self.logic(b);
        }
        let (_, native) = binary_op(&b.op)?;
        let l = self.expr(&b.left)?;
        let r = self.expr(&b.right)?;
        let Some(f) = native else {
            // `& | ^` and the comparisons, as Rust's operators; a comparison gives a
            // mask word per lane.
            let op = b.op;
            let compare = !matches!(op, BinOp::BitAnd(_) | BinOp::BitOr(_) | BinOp::BitXor(_));
            return Some(self.apply_as(compare, vec![l, r], |a| {
                let (x, y) = (&a[0], &a[1]);
                quote!((#x #op #y))
            }));
        };
        let f = format_ident!("{f}");
        // A run plus (or minus) a value the same for every lane is a run.
        let base = match (&l, &r, f == "add" || f == "sub") {
            (V::Run { base, ok, .. }, V::One(o), true) => {
                Some((quote!(__dc::ops::#f(#base, #o)), ok.clone()))
            }
            (V::One(o), V::Run { base, ok, .. }, true) if f == "add" => {
                Some((quote!(__dc::ops::add(#o, #base)), ok.clone()))
            }
            _ => None,
        };
        let v = self.apply(vec![l, r], |a| {
            let (x, y) = (&a[0], &a[1]);
            quote!(__dc::ops::#f(#x, #y))
        });
        Some(match (v, base) {
            (V::Lanes(lanes), Some((base, ok))) => V::Run { lanes, base, ok },
            (v, _) => v,
        })
    }

    /// `&&` and `||`: the right side is evaluated only for the lanes that need it (it
    /// may load at an index the left side guards).
    pub(super) fn logic(&mut self, b: &syn::ExprBinary) -> Option<V> {
        let and = matches!(b.op, BinOp::And(_));
        let l = self.expr(&b.left)?;
        let r = self.expr(&b.right)?;
        let (l, r) = match (l, r) {
            (V::One(l), V::One(r)) => {
                let op = b.op;
                return Some(V::One(quote!((#l #op #r))));
            }
            // The same left side for every lane: a branch, no mask to narrow.
            (V::One(l), r) => {
                let r = r.lanes();
                let (when, other) = match and {
                    true => (quote!(#l), quote!(false)),
                    false => (quote!(!(#l)), quote!(true)),
                };
                return Some(V::Lanes(quote!(
                    if #when {
                        __dc::cpu::lanes::bools(#r)
                    } else {
                        [__dc::cpu::lanes::B::new(#other); __dc::cpu::lanes::LANES]
                    }
                )));
            }
            (l, r) => (l.lanes(), r.lanes()),
        };
        let (narrow, combine) = if and {
            (quote!(and), quote!(__x & __y[__l]))
        } else {
            (quote!(and_not), quote!(__x | __y[__l]))
        };
        Some(V::Lanes(quote!({
            let __lhs = __dc::cpu::lanes::bools(#l);
            let __y = {
                let __m = __dc::cpu::lanes::#narrow(&__m, &__lhs);
                __dc::cpu::lanes::bools(#r)
            };
            __dc::cpu::lanes::each(|__l| { let __x = __lhs[__l]; #combine })
        })))
    }

    pub(super) fn method(&mut self, m: &syn::ExprMethodCall) -> Option<V> {
        if m.turbofish.is_some() {
            return None;
        }
        let name = m.method.to_string();
        if name == "len" && m.args.is_empty() {
            let mem = self.array(&m.receiver, false)?;
            return Some(V::One(quote!(#mem.len())));
        }
        let native = match name.as_str() {
            "wrapping_add" => "add",
            "wrapping_sub" => "sub",
            "wrapping_mul" => "mul",
            "powi" => "powi",
            _ => {
                let (_, _, native, arity) = math_methods().find(|(n, ..)| *n == name)?;
                if m.args.len() + 1 != arity {
                    return None;
                }
                native
            }
        };
        let f = format_ident!("{native}");
        let mut args = vec![self.expr(&m.receiver)?];
        for a in &m.args {
            args.push(self.expr(a)?);
        }
        // `exp` of lanes has a form of its own that vectorises (a C library call per
        // lane does not).
        if native == "exp" {
            if let [V::Lanes(a)] = &args[..] {
                return Some(V::Lanes(quote!(__dc::cpu::lanes::exp(#a))));
            }
        }
        Some(self.apply(args, |a| quote!(__dc::ops::#f(#(#a),*))))
    }

    /// `local_id().x` and the other builtins' coordinates.
    pub(super) fn builtin(&mut self, f: &syn::ExprField) -> Option<V> {
        let Expr::Call(c) = &*f.base else { return None };
        if !c.args.is_empty() {
            return None;
        }
        let (name, _) = builtins().find(|(n, _)| is_call_to(c, n))?;
        let syn::Member::Named(axis) = &f.member else {
            return None;
        };
        let k = ["x", "y", "z"].iter().position(|a| axis == a)?;
        // A chunk lies in one row of its group: only `.x` of the thread's ids differs
        // between its lanes.
        Some(match (name, k) {
            ("local_id", 0) => V::Run {
                lanes: quote!(__ids.local_x),
                base: quote!(__ids.local_x[0]),
                ok: None,
            },
            ("global_id", 0) => V::Run {
                lanes: quote!(__ids.global_x),
                base: quote!(__ids.global_x[0]),
                ok: None,
            },
            ("local_id", 1) => V::One(quote!(__ids.local_y)),
            ("local_id", 2) => V::One(quote!(__ids.local_z)),
            ("global_id", 1) => V::One(quote!(__ids.global_y)),
            ("global_id", 2) => V::One(quote!(__ids.global_z)),
            _ => {
                let native = format_ident!("{name}");
                V::One(quote!(__ctx.#native.#axis))
            }
        })
    }

    /// `if c { a } else { b }` as a value: both sides are evaluated, each for the lanes
    /// that take it.
    pub(super) fn if_value(&mut self, i: &syn::ExprIf) -> Option<V> {
        let then = single_expr(&i.then_branch.stmts)?;
        let els = match &i.else_branch {
            Some((_, e)) => match &**e {
                Expr::Block(b) => single_expr(&b.block.stmts)?,
                e @ Expr::If(_) => e,
                _ => return None,
            },
            None => return None,
        };
        match self.expr(&i.cond)? {
            V::One(c) => {
                let (t, e) = (self.expr(then)?, self.expr(els)?);
                Some(match (t, e) {
                    (V::One(t), V::One(e)) => V::One(quote!(if #c { #t } else { #e })),
                    (t, e) => {
                        // The branches' lane types meet through `conform` (a `bool` has
                        // two); `then` is a closure so that only the branch taken runs.
                        let (t, e) = (t.lanes(), e.lanes());
                        V::Lanes(quote!({
                            let __t = || #t;
                            if #c { __t() } else { __dc::cpu::lanes::conform_like(#e, &__t) }
                        }))
                    }
                })
            }
            V::Lanes(c) | V::Run { lanes: c, .. } => {
                let t = self.expr(then)?.lanes();
                let e = self.expr(els)?.lanes();
                let both = quote!({
                    let __c = __dc::cpu::lanes::bools(#c);
                    let __t = { let __m = __dc::cpu::lanes::and(&__m, &__c); #t };
                    let __e = { let __m = __dc::cpu::lanes::and_not(&__m, &__c); #e };
                    __dc::cpu::lanes::pick(&__c, __t, __dc::cpu::lanes::conform(__e, &__t))
                });
                // Every lane takes `then` (see `if_stmt`): `then` alone; none does: `else`
                // alone. The other forms take the type of `then`, as `pick` does.
                Some(V::Lanes(match self.lane_tests(&i.cond) {
                    Some(LaneTests { all, none }) => {
                        let (t, e) = self.one_copy(|em| Some((em.expr(then)?, em.expr(els)?)))?;
                        let (t, e) = (t.lanes(), e.lanes());
                        quote!({
                            let __t = || #t;
                            if #all {
                                __t()
                            } else if #none {
                                __dc::cpu::lanes::conform_like(#e, &__t)
                            } else {
                                __dc::cpu::lanes::conform_like(#both, &__t)
                            }
                        })
                    }
                    None => both,
                }))
            }
        }
    }
}

/// How lane code reaches `mem` at the index `v`: the value to bind to `__i`, the load
/// at `__i`, and the store of `__v` there (loads and stores take the indices the same
/// way). A run is passed as its first index (`load_run` and `store_run` build the
/// lanes' indices where they need them); a local that may be a run as whether it is
/// one, its first index, and its lanes for when it is not; other indices as lanes,
/// which `load` and `store` test.
pub(super) fn lane_access(mem: &TokenStream, v: V) -> (TokenStream, TokenStream, TokenStream) {
    match v {
        V::Run { base, ok: None, .. } => (
            base,
            quote!(__dc::cpu::lanes::load_run(&#mem, &__m, __i)),
            quote!(__dc::cpu::lanes::store_run(&#mem, &__m, __i, __v)),
        ),
        V::Run {
            lanes,
            base,
            ok: Some(ok),
        } => (
            quote!((#ok, #base, || #lanes)),
            quote!(__dc::cpu::lanes::load_run_if(&#mem, &__m, __i.0, __i.1, __i.2)),
            quote!(__dc::cpu::lanes::store_run_if(&#mem, &__m, __i.0, __i.1, __i.2, __v)),
        ),
        v => (
            v.lanes(),
            quote!(__dc::cpu::lanes::load(&#mem, &__m, __i)),
            quote!(__dc::cpu::lanes::store(&#mem, &__m, __i, __v)),
        ),
    }
}

/// `index` as `a + c·var` (`None` for an absent `a`, or `c` of one): `var`,
/// `a + var`, `var + a`, `var * c`, `c * var`, and sums of `a` with those.
pub(super) fn affine<'e>(
    index: &'e Expr,
    var: &str,
) -> Option<(Option<&'e Expr>, Option<&'e Expr>)> {
    let index = unparen(index);
    if let Some(c) = var_term(index, var) {
        return Some((None, c));
    }
    let Expr::Binary(b) = index else { return None };
    if !matches!(b.op, BinOp::Add(_)) {
        return None;
    }
    match (var_term(&b.left, var), var_term(&b.right, var)) {
        (Some(c), None) if !mentions(&b.right, var) => Some((Some(&b.right), c)),
        (None, Some(c)) if !mentions(&b.left, var) => Some((Some(&b.left), c)),
        _ => None,
    }
}

/// `var` (`Some(None)`: a factor of one), or `var * c` / `c * var` (`Some(Some(c))`).
pub(super) fn var_term<'e>(e: &'e Expr, var: &str) -> Option<Option<&'e Expr>> {
    let e = unparen(e);
    if is_name(e, var) {
        return Some(None);
    }
    let Expr::Binary(b) = e else { return None };
    if !matches!(b.op, BinOp::Mul(_)) {
        return None;
    }
    if is_name(unparen(&b.left), var) && !mentions(&b.right, var) {
        return Some(Some(&b.right));
    }
    if is_name(unparen(&b.right), var) && !mentions(&b.left, var) {
        return Some(Some(&b.left));
    }
    None
}

pub(super) fn is_name(e: &Expr, name: &str) -> bool {
    matches!(e, Expr::Path(p) if p.path.is_ident(name))
}

/// Whether `name` appears anywhere in `e` (as any identifier: a conservative test).
pub(super) fn mentions(e: &Expr, name: &str) -> bool {
    names_in(std::iter::once(e.to_token_stream())).contains(name)
}

/// The one expression of a block such as `{ x[i] }`.
pub(super) fn single_expr(stmts: &[Stmt]) -> Option<&Expr> {
    match stmts {
        [Stmt::Expr(e, None)] => Some(e),
        _ => None,
    }
}

/// A plain scalar type other than `f16` (which `as` cannot name natively).
pub(super) fn scalar_type(ty: &Type) -> Option<TokenStream> {
    let Type::Path(p) = ty else { return None };
    let id = p.path.get_ident()?;
    ["bool", "i32", "u32", "i64", "u64", "f32", "f64"]
        .contains(&id.to_string().as_str())
        .then(|| quote!(#id))
}
