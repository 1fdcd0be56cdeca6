//! Statements and control flow: `let`, assignments, stores, barriers, `if` (and `if` as
//! a value), `for`, loops and jumps.

use super::*;

impl Builder {
    /// `let [mut] name[: ty] = init;`
    pub fn let_(&mut self, name: &str, ty: Option<Type>, mutable: bool, init: V) -> R<Var> {
        let untyped = init.clone();
        let (init, defaulted) = match ty {
            Some(ty) => (
                self.coerce(init, ty, &format!("the initialiser of `{name}`"))?,
                false,
            ),
            None => {
                let untyped = !matches!(init, V::Typed(_));
                (self.default_of(init)?, untyped)
            }
        };
        let var = self.new_local(name, init.ty, mutable, defaulted);
        if defaulted {
            self.untyped_init[var.id as usize] = Some(untyped);
        }
        self.push(Stmt::Let {
            local: var.id,
            init: Some(init),
        });
        Ok(var)
    }

    pub fn assign(&mut self, var: Var, value: V) -> R<()> {
        let local = &self.kernel.locals[var.id as usize];
        if !local.mutable {
            return self.err(format!(
                "cannot assign twice to immutable local `{}`",
                local.name
            ));
        }
        let (ty, name) = (local.ty, local.name.clone());
        let value = self.coerce(value, ty, &format!("the value assigned to `{name}`"))?;
        self.assigned[var.id as usize] = true;
        self.push(Stmt::Assign {
            local: var.id,
            value,
        });
        Ok(())
    }

    pub fn store(&mut self, mem: Mem, index: V, value: V) -> R<()> {
        let index = self.index(index)?;
        let value = self.coerce(value, mem.elem, "the stored value")?;
        self.push(Stmt::Store {
            mem: mem.mem,
            index,
            value,
        });
        Ok(())
    }

    pub fn barrier(&mut self) {
        self.push(Stmt::Barrier);
    }
    pub fn ret(&mut self) {
        self.push(Stmt::Return);
    }
    pub fn brk(&mut self) {
        self.push(Stmt::Break);
    }
    pub fn cont(&mut self) {
        self.push(Stmt::Continue);
    }

    pub fn begin_if(&mut self, cond: V) -> R<()> {
        let cond = self.coerce(cond, ScalarType::Bool, "an if condition")?;
        self.frames.push((Frame::Then { cond }, Vec::new()));
        Ok(())
    }

    pub fn begin_else(&mut self) -> R<()> {
        match self.frames.pop() {
            Some((Frame::Then { cond }, then)) => {
                self.frames.push((Frame::Else { cond, then }, Vec::new()));
                Ok(())
            }
            _ => self.err("internal: else without if"),
        }
    }

    pub fn end_if(&mut self) -> R<()> {
        let s = match self.frames.pop() {
            Some((Frame::Then { cond }, then)) => Stmt::If {
                cond,
                then,
                otherwise: Vec::new(),
            },
            Some((Frame::Else { cond, then }, otherwise)) => Stmt::If {
                cond,
                then,
                otherwise,
            },
            _ => return self.err("internal: end_if without if"),
        };
        // An `if` on host constants keeps only its taken arm when the kernel is finished
        // (`constants::propagate_constants`), with every other constant it then exposes.
        self.push(s);
        Ok(())
    }

    /// Starts `if cond { .. } else { .. }` used as a value; each arm ends with `set_value`.
    pub fn begin_if_value(&mut self, cond: V) -> R<Slot> {
        let n = self.kernel.locals.len();
        let var = self.new_local(
            &format!("if_value_{n}"),
            ScalarType::Bool.into(),
            true,
            false,
        );
        self.pending[var.id as usize] = true;
        self.push(Stmt::Let {
            local: var.id,
            init: None,
        });
        self.begin_if(cond)?;
        Ok(Slot { var })
    }

    pub fn set_value(&mut self, slot: Slot, v: V) -> R<()> {
        let id = slot.var.id as usize;
        if self.pending[id] {
            let e = self.default_of(v.clone())?;
            self.kernel.locals[id].ty = e.ty;
            self.pending[id] = false;
        }
        self.assign(slot.var, v)
    }

    pub fn end_if_value(&mut self, slot: Slot) -> R<V> {
        self.end_if()?;
        if self.pending[slot.var.id as usize] {
            return self.err("an if expression needs a value in both arms");
        }
        Ok(self.get(slot.var))
    }

    /// Starts `for name in (start..end).step_by(step)`; returns the loop variable.
    pub fn begin_for(&mut self, name: &str, start: V, end: V, step: Option<V>) -> R<Var> {
        let defaulted = !matches!(start, V::Typed(_)) && !matches!(end, V::Typed(_));
        let (start, end) = self.unify(start, end, "a for range")?;
        let ty = match start.ty.as_scalar() {
            Some(t @ (ScalarType::U32 | ScalarType::I32)) => t,
            _ => {
                return self.err(format!(
                    "a for range must be u32 or i32, found {}",
                    start.ty
                ))
            }
        };
        let step = match step {
            Some(s) => self.coerce(s, ty, "a step_by amount")?,
            None => lit(Literal::int(ty, 1).unwrap()),
        };
        let var = self.new_local(name, ty.into(), false, defaulted);
        self.frames.push((
            Frame::For {
                var: var.id,
                start,
                end,
                step,
            },
            Vec::new(),
        ));
        Ok(var)
    }

    pub fn end_for(&mut self) -> R<()> {
        match self.frames.pop() {
            Some((
                Frame::For {
                    var,
                    start,
                    end,
                    step,
                },
                body,
            )) => {
                self.push(Stmt::For {
                    var,
                    start,
                    end,
                    step,
                    body,
                });
                Ok(())
            }
            _ => self.err("internal: end_for without for"),
        }
    }

    pub fn begin_loop(&mut self) {
        self.frames.push((Frame::Loop, Vec::new()));
    }

    /// Inside a loop: `if !cond { break }` (how `while` is expressed).
    pub fn break_unless(&mut self, cond: V) -> R<()> {
        let cond = self.coerce(cond, ScalarType::Bool, "a while condition")?;
        self.push(Stmt::If {
            cond: Expr {
                ty: ScalarType::Bool.into(),
                kind: ExprKind::Unary(UnaryOp::Not, Box::new(cond)),
            },
            then: vec![Stmt::Break],
            otherwise: Vec::new(),
        });
        Ok(())
    }

    pub fn end_loop(&mut self) -> R<()> {
        match self.frames.pop() {
            Some((Frame::Loop, body)) => {
                self.push(Stmt::Loop { body });
                Ok(())
            }
            _ => self.err("internal: end_loop without loop"),
        }
    }
}
