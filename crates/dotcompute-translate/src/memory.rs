//! Buffer and array accesses: which memory an expression names, element addresses,
//! and the indices that let the CPU drop bounds checks.

use super::*;

impl Tx {
    /// Records that `mem` is indexed by `index`, for bounds-check elimination.
    pub(crate) fn note_index(&mut self, mem: &Ident, index: &Expr) {
        if let Expr::Path(p) = index {
            if let Some(id) = p.path.get_ident() {
                let is_buffer = matches!(
                    self.lookup(&mem.to_string()),
                    Some(Binding::Buffer | Binding::ReadOnlyBuffer)
                );
                if is_buffer && self.lookup(&id.to_string()) == Some(Binding::GidX) {
                    self.gid_indexed.insert(mem.to_string());
                }
            }
        }
    }

    /// The handle of a buffer or shared array named by `e`.
    pub(crate) fn memory(&mut self, e: &Expr) -> Option<Ident> {
        if let Expr::Path(p) = e {
            if let Some(id) = p.path.get_ident() {
                match self.lookup(&id.to_string()) {
                    Some(b) if b.is_array() => return Some(id.clone()),
                    // Already reported where it was declared.
                    Some(Binding::Failed) => return None,
                    Some(_) => {
                        self.errors.push(err(
                            id.span(),
                            format!("`{id}` is a scalar, not a buffer or shared array"),
                        ));
                        return None;
                    }
                    None => {}
                }
            }
        }
        self.errors.push(err(
            e.span(),
            "only buffer parameters and shared arrays can be indexed in kernels",
        ));
        None
    }

    /// The array and the (flat) index of `a[i]`, or of `a[y][x]` on a 2-D shared array
    /// (row-major: `y * row_len + x`; natively an `x` past the row is out of bounds, as
    /// in Rust, not the next row's element).
    pub(crate) fn element(
        &mut self,
        ix: &syn::ExprIndex,
        write: bool,
    ) -> Option<(Ident, TokenStream, TokenStream)> {
        if let Expr::Index(outer) = &*ix.expr {
            let mem = self.memory(&outer.expr)?;
            let Some(row_len) = self.row_len.get(&mem.to_string()).cloned() else {
                self.errors.push(err(
                    ix.span(),
                    format!("`{mem}` has one dimension: index it as `{mem}[i]`"),
                ));
                return None;
            };
            if write {
                self.writable_memory(&outer.expr)?;
            }
            let (yb, yn) = self.expr(&outer.index);
            let (xb, xn) = self.expr(&ix.index);
            return Some((
                mem,
                quote!({
                    let __y = #yb; let __x = #xb;
                    let __y = __b.cast(__y, __dc::ir::ScalarType::U32)?;
                    let __x = __b.cast(__x, __dc::ir::ScalarType::U32)?;
                    let __row = __b.binary(__dc::ir::BinaryOp::Mul, __y, __dc::ir::V::host((#row_len) as u32))?;
                    __b.binary(__dc::ir::BinaryOp::Add, __row, __x)?
                }),
                quote!(__dc::ops::index_2d(#yn, #xn, (#row_len) as u32)),
            ));
        }
        let mem = if write {
            self.writable_memory(&ix.expr)?
        } else {
            self.memory(&ix.expr)?
        };
        if self.row_len.contains_key(&mem.to_string()) {
            self.errors.push(err(
                ix.span(),
                format!("`{mem}` has two dimensions: index it as `{mem}[row][column]`"),
            ));
            return None;
        }
        self.note_index(&mem, &ix.index);
        let (ib, inn) = self.expr(&ix.index);
        Some((mem, ib, inn))
    }

    /// Like `memory`, for a write: a read-only array is a compile error, as in Rust.
    pub(crate) fn writable_memory(&mut self, e: &Expr) -> Option<Ident> {
        let mem = self.memory(e)?;
        let msg = match self.lookup(&mem.to_string()) {
            Some(Binding::ReadOnlyBuffer) => format!(
                "cannot write to `{mem}`: it is a read-only buffer (`&[T]`); declare the \
                 parameter `&mut [T]`"
            ),
            Some(Binding::ReadOnlyArray) => format!(
                "cannot write to `{mem}`: it is not mutable; declare it `let mut` (a local \
                 array) or `&mut [T]` (a kernel function's parameter)"
            ),
            _ => return Some(mem),
        };
        self.errors.push(err(mem.span(), msg));
        None
    }
}
