//! Types of values as the builder infers them: defaults for untyped literals, coercion
//! to a destination, unification of two operands, and the locals it declares.

use super::*;

impl Builder {
    pub(super) fn default_of(&self, v: V) -> R<Expr> {
        match v {
            V::Typed(e) => Ok(e),
            V::Lanes(lanes) => {
                let scalar = match lanes.first() {
                    Some(V::Float(_)) => ScalarType::F32,
                    _ => ScalarType::I32,
                };
                self.vector_of(Type::vector(scalar, lanes.len() as u8), lanes)
            }
            V::Int(n) => match i32::try_from(n) {
                Ok(n) => Ok(lit(Literal::I32(n))),
                Err(_) => self.err(format!(
                    "integer literal {n} does not fit i32; add a suffix (`{n}u64`)"
                )),
            },
            V::Float(f) => Ok(lit(Literal::f64(f))),
        }
    }

    pub(super) fn hint(&self, e: &Expr) -> String {
        if let ExprKind::Local(id) = e.kind {
            if self.defaulted[id as usize] {
                let l = &self.kernel.locals[id as usize];
                return format!(
                    "; local `{}` took {} from an untyped literal, as Rust does when nothing \
                     constrains it: annotate it (`let {}: T = ...`) or suffix the literal",
                    l.name, l.ty, l.name
                );
            }
        }
        String::new()
    }

    /// Converts `v` to `ty`, fixing the type of an untyped literal.
    pub(super) fn coerce(&mut self, v: V, ty: impl Into<Type>, what: &str) -> R<Expr> {
        let ty: Type = ty.into();
        match v {
            V::Typed(e) if e.ty == ty => Ok(e),
            V::Typed(e) if self.retype(&e, ty) => Ok(Expr { ty, ..e }),
            V::Typed(e) => {
                let hint = self.hint(&e);
                self.err(format!("{what} must be {ty}, found {}{hint}", e.ty))
            }
            V::Lanes(lanes) if ty.is_vector() && lanes.len() == ty.lanes as usize => {
                self.vector_of(ty, lanes)
            }
            V::Lanes(lanes) => self.err(format!(
                "{what} must be {ty}, found a vector of {} lanes",
                lanes.len()
            )),
            V::Int(_) | V::Float(_) if ty.is_vector() => self.err(format!(
                "{what} must be {ty}, found a number: make a vector of it with \
                 `Vec{}::splat(x)`",
                ty.lanes
            )),
            V::Int(n) => match Literal::int(ty.scalar, n) {
                Some(l) => Ok(lit(l)),
                None => self.err(format!("{what}: integer literal {n} is not a valid {ty}")),
            },
            V::Float(f) => match Literal::float(ty.scalar, f) {
                Some(l) => Ok(lit(l)),
                None => self.err(format!("{what} must be {ty}, found a float literal")),
            },
        }
    }

    pub(super) fn index(&self, v: V) -> R<Expr> {
        match v {
            V::Typed(e) if e.ty == ScalarType::U32 => Ok(e),
            // Other integer indices are converted to u32 exactly as the CPU path does
            // (`as u32`), so a negative index becomes a huge one and is out of bounds.
            V::Typed(e) if e.ty.as_scalar().is_some_and(ScalarType::is_int) => Ok(Expr {
                ty: ScalarType::U32.into(),
                kind: ExprKind::Cast(Box::new(e)),
            }),
            V::Typed(e) => {
                let hint = self.hint(&e);
                self.err(format!("an index must be an integer, found {}{hint}", e.ty))
            }
            V::Int(n) if (0..=u32::MAX as i128).contains(&n) => Ok(lit(Literal::U32(n as u32))),
            V::Int(n) => self.err(format!("index {n} is outside the u32 range")),
            V::Float(_) => self.err("an index must be an integer, found a float literal"),
            V::Lanes(_) => self.err("an index must be an integer, found a vector"),
        }
    }

    /// Rust infers `let x = 1.5;` from how `x` is used later; the builder, which sees
    /// statements in order, first gives it the default type (`f64`, `i32`). When the
    /// first read of such a local meets a value of another type, and the local has not
    /// been assigned, its declaration is retyped to that type, as rustc's inference would
    /// have it (`let x = 1.5; a[i] * x` with `a: &[f32]`). Returns whether `e` was
    /// such a local and now has type `ty`.
    pub(super) fn retype(&mut self, e: &Expr, ty: Type) -> bool {
        let ExprKind::Local(id) = e.kind else {
            return false;
        };
        // Untyped literals are scalars; a vector comes only from `splat` or `new`.
        let Some(ty) = ty.as_scalar() else {
            return false;
        };
        let i = id as usize;
        if !self.defaulted[i] || self.assigned[i] || self.uses[i].get() != 1 {
            return false;
        }
        let literal = match self.untyped_init[i] {
            Some(V::Int(n)) => Literal::int(ty, n),
            Some(V::Float(f)) => Literal::float(ty, f),
            _ => None,
        };
        let Some(literal) = literal else {
            return false;
        };
        let found = self
            .frames
            .iter_mut()
            .any(|(_, stmts)| set_let_init(stmts, id, lit(literal)));
        if !found {
            return false;
        }
        self.kernel.locals[i].ty = ty.into();
        self.defaulted[i] = false;
        self.untyped_init[i] = None;
        true
    }

    /// Gives two values one type: a literal adopts the other side's type.
    pub(super) fn unify(&mut self, a: V, b: V, what: &str) -> R<(Expr, Expr)> {
        match (a, b) {
            (V::Typed(a), V::Typed(b)) if a.ty != b.ty && self.retype(&a, b.ty) => {
                Ok((Expr { ty: b.ty, ..a }, b))
            }
            (V::Typed(a), V::Typed(b)) if a.ty != b.ty && self.retype(&b, a.ty) => {
                let ty = a.ty;
                Ok((a, Expr { ty, ..b }))
            }
            (V::Typed(a), V::Typed(b)) => {
                if a.ty != b.ty {
                    let hint = format!("{}{}", self.hint(&a), self.hint(&b));
                    return self.err(format!(
                        "{what}: operands have different types, {} and {}{hint}",
                        a.ty, b.ty
                    ));
                }
                Ok((a, b))
            }
            (V::Typed(a), b) => {
                let b = self.coerce(b, a.ty, what)?;
                Ok((a, b))
            }
            (a, V::Typed(b)) => {
                let a = self.coerce(a, b.ty, what)?;
                Ok((a, b))
            }
            (a, b) => {
                let a = self.default_of(a)?;
                let b = self.coerce(b, a.ty, what)?;
                Ok((a, b))
            }
        }
    }

    pub(super) fn push(&mut self, s: Stmt) {
        self.frames.last_mut().expect("root frame").1.push(s);
    }

    pub(super) fn new_local(
        &mut self,
        name: &str,
        ty: Type,
        mutable: bool,
        defaulted: bool,
    ) -> Var {
        let id = self.kernel.locals.len() as u32;
        self.kernel.locals.push(Local {
            name: name.into(),
            ty,
            mutable,
        });
        self.defaulted.push(defaulted);
        self.untyped_init.push(None);
        self.uses.push(std::cell::Cell::new(0));
        self.assigned.push(false);
        self.pending.push(false);
        Var { id }
    }

    // ---- expressions ----
}
