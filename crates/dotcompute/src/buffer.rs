//! Typed device buffers and views.

use crate::device::Device;
use crate::graph::{Keeper, Kept};
use crate::tracking::Uses;
use dotcompute_hal::{Error, RawBuffer, Result, StreamId, StreamSet};
use dotcompute_ir::{Literal, ScalarType, Type, Vec2, Vec4};
use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

mod sealed {
    pub trait Sealed {}
}

/// Element types of buffers: the IR's scalar types that can live in memory.
pub trait Element:
    bytemuck::Pod + Send + Sync + sealed::Sealed + PartialEq + std::fmt::Debug
{
    /// The IR type: a scalar, or a vector ([`crate::Vec4`]) for 8- and 16-byte elements.
    const TYPE: Type;
}

/// Types that can be passed to a kernel by value.
pub trait ScalarArg: Copy + sealed::Sealed {
    fn literal(self) -> Literal;
}

macro_rules! element {
    ($($t:ty => $st:ident, $lit:expr;)*) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const TYPE: Type = Type::scalar(ScalarType::$st);
        }
        impl ScalarArg for $t {
            fn literal(self) -> Literal {
                #[allow(clippy::redundant_closure_call)]
                ($lit)(self)
            }
        }
    )*};
}
element! {
    i32 => I32, Literal::I32;
    u32 => U32, Literal::U32;
    i64 => I64, Literal::I64;
    u64 => U64, Literal::U64;
    f32 => F32, Literal::f32;
    f64 => F64, Literal::f64;
}
// 16-bit floats: f16 is a kernel type on devices with the `f16` capability; bf16 a
// storage type (buffers, transfers, `Device::matmul`).
impl sealed::Sealed for half::f16 {}
impl Element for half::f16 {
    const TYPE: Type = Type::scalar(ScalarType::F16);
}
impl ScalarArg for half::f16 {
    fn literal(self) -> Literal {
        Literal::F16(self.to_bits())
    }
}
// Bytes: a storage type. Kernels read a byte buffer as words (`Buffer::<u8>::as_words`).
impl sealed::Sealed for u8 {}
impl Element for u8 {
    const TYPE: Type = Type::scalar(ScalarType::U8);
}
impl sealed::Sealed for half::bf16 {}
impl Element for half::bf16 {
    const TYPE: Type = Type::scalar(ScalarType::BF16);
}
// Vectors of 32-bit lanes: one 8- or 16-byte load or store per element on GPUs.
macro_rules! vector_element {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for Vec2<$t> {}
        impl Element for Vec2<$t> {
            const TYPE: Type = Vec2::<$t>::TYPE;
        }
        impl sealed::Sealed for Vec4<$t> {}
        impl Element for Vec4<$t> {
            const TYPE: Type = Vec4::<$t>::TYPE;
        }
    )*};
}
vector_element!(f32, i32, u32);
impl sealed::Sealed for bool {}
impl ScalarArg for bool {
    fn literal(self) -> Literal {
        Literal::Bool(self)
    }
}

/// A typed array in a device's memory. Memory comes from the device's pool and goes back
/// to it on drop. Launches borrow buffers (`&` for `&[T]` parameters, `&mut` for
/// `&mut [T]`), so a buffer cannot be freed or written by the host while a launch is
/// being enqueued. Uses on different streams are ordered automatically ([`crate::Stream`]).
pub struct Buffer<T: Element> {
    device: Device,
    raw: Option<RawBuffer>,
    len: usize,
    uses: Uses,
    /// Set on a buffer a graph recording made ([`AsStream::scratch`] on a
    /// [`Recorder`](crate::Recorder)): dropped, its memory goes to the graph, which
    /// replays the recorded work on it, instead of back to the pool.
    pub(crate) keeper: Option<Arc<Keeper>>,
    _t: PhantomData<T>,
}

impl<T: Element> std::fmt::Debug for Buffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Buffer<{}>[{}] on {}",
            T::TYPE,
            self.len,
            self.device.label()
        )
    }
}

fn resolve_range(
    range: impl RangeBounds<usize>,
    len: usize,
    op: &'static str,
) -> Result<(usize, usize)> {
    let start = match range.start_bound() {
        Bound::Included(&s) => s,
        Bound::Excluded(&s) => s.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.saturating_add(1),
        Bound::Excluded(&e) => e,
        Bound::Unbounded => len,
    };
    if start > end || end > len {
        return Err(Error::Range {
            op,
            detail: format!("range {start}..{end} is outside a buffer of {len} elements"),
        });
    }
    Ok((start, end - start))
}

pub(crate) fn same_len(op: &'static str, dst: usize, src: usize) -> Result<()> {
    if dst != src {
        return Err(Error::Range {
            op,
            detail: format!("destination has {dst} elements, source has {src}"),
        });
    }
    Ok(())
}

/// The size of `len` elements of `T`, or the out-of-memory error of an allocation that
/// size (for device and host buffers alike).
pub(crate) fn byte_len<T: Element>(device: &Device, len: usize) -> Result<usize> {
    len.checked_mul(std::mem::size_of::<T>())
        .ok_or_else(|| Error::OutOfMemory {
            device: device.label(),
            requested: u64::MAX,
            detail: format!("{len} elements of {} overflow the address space", T::TYPE),
        })
}

impl<T: Element> Buffer<T> {
    pub(crate) fn new(device: &Device, len: usize) -> Result<Buffer<T>> {
        let bytes = byte_len::<T>(device, len)?;
        let (raw, previous_users) = device.backend().alloc(bytes)?;
        let mut buffer = Buffer {
            device: device.clone(),
            raw: Some(raw),
            len,
            uses: Uses::new(previous_users),
            keeper: None,
            _t: PhantomData,
        };
        // A byte buffer's last word is read whole through `as_words`: the bytes past its
        // end are zeroed once here (allocations are at least 256 bytes, whole words), and
        // no transfer or fill of the buffer's elements reaches them later.
        if T::TYPE == Type::scalar(ScalarType::U8) && len % 4 != 0 {
            let padding = len.next_multiple_of(4) - len;
            BufferViewMut {
                buffer: &mut buffer,
                offset: len,
                len: padding,
            }
            .fill_on(StreamId::DEFAULT, T::zeroed())?;
        }
        Ok(buffer)
    }

    pub(crate) fn uses(&self) -> &Uses {
        &self.uses
    }

    pub(crate) fn raw(&self) -> &RawBuffer {
        self.raw.as_ref().expect("buffer is alive")
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn size_bytes(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }
    /// The device that owns this buffer.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Copies the whole buffer to a new host vector.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        self.view().to_vec()
    }

    /// The elements in place, without a copy, on a device whose memory is the host's
    /// (the CPU backend), once the work enqueued so far that writes the buffer is done;
    /// `None` on a device the host cannot address (copy with [`Buffer::to_vec`] there).
    /// The borrow keeps the buffer from being written while the slice lives.
    ///
    /// ```
    /// use dotcompute::prelude::*;
    /// let device = Device::cpu();
    /// let b = device.upload(&[1u32, 2, 3])?;
    /// if let Some(elements) = b.host_slice()? {
    ///     assert_eq!(elements.iter().sum::<u32>(), 6); // read where the device keeps them
    /// }
    /// # Ok::<(), dotcompute::Error>(())
    /// ```
    pub fn host_slice(&self) -> Result<Option<&[T]>> {
        let Some(start) = self.host_ready(false)? else {
            return Ok(None);
        };
        // SAFETY: `start` is the buffer's first element in host memory (len elements,
        // aligned: buffers are 64-byte aligned), every write enqueued before is done
        // (host_ready), and no write can be enqueued while `&self` is borrowed.
        Ok(Some(unsafe {
            std::slice::from_raw_parts(start as *const T, self.len)
        }))
    }

    /// [`Buffer::host_slice`] for writing in place: once the work enqueued so far that
    /// reads or writes the buffer is done. The `&mut` borrow keeps every other use away.
    ///
    /// ```
    /// use dotcompute::prelude::*;
    /// let device = Device::cpu();
    /// let mut b = device.alloc_filled(3, 0u32)?;
    /// if let Some(elements) = b.host_slice_mut()? {
    ///     elements[1] = 7;
    /// }
    /// assert_eq!(b.to_vec()?, [0, 7, 0]);
    /// # Ok::<(), dotcompute::Error>(())
    /// ```
    pub fn host_slice_mut(&mut self) -> Result<Option<&mut [T]>> {
        let Some(start) = self.host_ready(true)? else {
            return Ok(None);
        };
        // SAFETY: as in host_slice, and `&mut self` excludes every other access.
        Ok(Some(unsafe {
            std::slice::from_raw_parts_mut(start as *mut T, self.len)
        }))
    }

    /// The buffer's host address once the work enqueued so far that conflicts with a host
    /// read (or, with `write`, a host write) is done; `None` where the host cannot
    /// address the device's memory.
    fn host_ready(&self, write: bool) -> Result<Option<*mut u8>> {
        if self.len == 0 {
            return Ok(Some(std::ptr::NonNull::<T>::dangling().as_ptr() as *mut u8));
        }
        let backend = self.device.backend();
        let Some(start) = backend.host_address(self.raw()) else {
            return Ok(None);
        };
        // Other streams' conflicting work first, then the host waits for all of it.
        self.device
            .before_use(&self.uses, StreamId::DEFAULT, write)?;
        backend.synchronize(StreamId::DEFAULT)?;
        Ok(Some(start))
    }
    /// Copies the whole buffer into `out` (same length).
    pub fn read_into(&self, out: &mut [T]) -> Result<()> {
        self.view().read_into(out)
    }
    /// Overwrites the whole buffer with `data` (same length).
    pub fn write(&mut self, data: &[T]) -> Result<()> {
        self.view_mut().write(data)
    }
    /// Sets every element to `value`.
    pub fn fill(&mut self, value: T) -> Result<()> {
        self.view_mut().fill(value)
    }
    /// Device-to-device copy of a whole buffer of the same length.
    pub fn copy_from(&mut self, src: &Buffer<T>) -> Result<()> {
        self.view_mut().copy_from(&src.view())
    }

    /// The whole buffer as a view.
    pub fn view(&self) -> BufferView<'_, T> {
        BufferView {
            buffer: self,
            offset: 0,
            len: self.len,
        }
    }
    pub fn view_mut(&mut self) -> BufferViewMut<'_, T> {
        let len = self.len;
        BufferViewMut {
            buffer: self,
            offset: 0,
            len,
        }
    }
    /// Elements `range` as a read-only view (`Err` if out of range).
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<BufferView<'_, T>> {
        let (offset, len) = resolve_range(range, self.len, "slice")?;
        Ok(BufferView {
            buffer: self,
            offset,
            len,
        })
    }
    /// Elements `range` as a writable view (`Err` if out of range).
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> Result<BufferViewMut<'_, T>> {
        let (offset, len) = resolve_range(range, self.len, "slice_mut")?;
        Ok(BufferViewMut {
            buffer: self,
            offset,
            len,
        })
    }
}

impl<T: Element> Drop for Buffer<T> {
    fn drop(&mut self) {
        if let Some(raw) = self.raw.take() {
            match self.keeper.take() {
                Some(keeper) => keeper.keep(Kept::new(
                    self.device.clone(),
                    raw,
                    std::mem::replace(&mut self.uses, Uses::new(StreamSet::EMPTY)),
                )),
                None => self.device.backend().free(raw, self.uses.users()),
            }
        }
    }
}

/// A read-only range of a buffer.
#[derive(Clone, Copy)]
pub struct BufferView<'a, T: Element> {
    buffer: &'a Buffer<T>,
    offset: usize,
    len: usize,
}

/// A writable range of a buffer.
pub struct BufferViewMut<'a, T: Element> {
    buffer: &'a mut Buffer<T>,
    offset: usize,
    len: usize,
}

const fn elem_size<T>() -> usize {
    std::mem::size_of::<T>()
}

impl<'a, T: Element> BufferView<'a, T> {
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Offset of the first element in the underlying buffer.
    pub fn offset(&self) -> usize {
        self.offset
    }
    pub fn buffer(&self) -> &'a Buffer<T> {
        self.buffer
    }
    /// A sub-range of this view.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<BufferView<'a, T>> {
        let (offset, len) = resolve_range(range, self.len, "slice")?;
        Ok(BufferView {
            buffer: self.buffer,
            offset: self.offset + offset,
            len,
        })
    }
    pub fn to_vec(&self) -> Result<Vec<T>> {
        self.read_vec_on(StreamId::DEFAULT)
    }
    pub fn read_into(&self, out: &mut [T]) -> Result<()> {
        self.read_into_on(StreamId::DEFAULT, out)
    }
    pub(crate) fn read_vec_on(&self, s: StreamId) -> Result<Vec<T>> {
        let mut out = vec![T::zeroed(); self.len];
        self.read_into_on(s, &mut out)?;
        Ok(out)
    }
    pub(crate) fn read_into_on(&self, s: StreamId, out: &mut [T]) -> Result<()> {
        same_len("read_into", out.len(), self.len)?;
        if self.len == 0 {
            return Ok(());
        }
        let device = &self.buffer.device;
        device.before_use(&self.buffer.uses, s, false)?;
        // SAFETY: the view's range is inside its buffer (checked when the view was made),
        // `out` has its length, and the read is ordered after the buffer's writes on other
        // streams (before_use); no write can run meanwhile (it would need `&mut`).
        unsafe {
            device.backend().read(
                s,
                self.buffer.raw(),
                self.offset * elem_size::<T>(),
                bytemuck::cast_slice_mut(out),
            )
        }
    }
}

impl<'a, T: Element> BufferViewMut<'a, T> {
    /// The buffer, the first element and the length (a graph keeps the `&mut` borrow
    /// for its life).
    pub(crate) fn into_parts(self) -> (&'a Buffer<T>, usize, usize) {
        (self.buffer, self.offset, self.len)
    }
}

impl<T: Element> BufferViewMut<'_, T> {
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn offset(&self) -> usize {
        self.offset
    }
    pub fn as_view(&self) -> BufferView<'_, T> {
        BufferView {
            buffer: self.buffer,
            offset: self.offset,
            len: self.len,
        }
    }
    pub fn to_vec(&self) -> Result<Vec<T>> {
        self.as_view().to_vec()
    }
    /// Overwrites the view with `data` (same length).
    pub fn write(&mut self, data: &[T]) -> Result<()> {
        self.write_on(StreamId::DEFAULT, data)
    }
    /// Sets every element of the view to `value`.
    pub fn fill(&mut self, value: T) -> Result<()> {
        self.fill_on(StreamId::DEFAULT, value)
    }
    /// Copies `src` (same length) into this view: device to device when both are on one
    /// device, through host memory otherwise.
    pub fn copy_from(&mut self, src: &BufferView<'_, T>) -> Result<()> {
        self.copy_from_on(StreamId::DEFAULT, src)
    }

    pub(crate) fn write_on(&mut self, s: StreamId, data: &[T]) -> Result<()> {
        same_len("write", self.len, data.len())?;
        if self.len == 0 {
            return Ok(());
        }
        let device = &self.buffer.device;
        device.before_use(&self.buffer.uses, s, true)?;
        // SAFETY: the view's range is inside its buffer, `data` has its length, the view is
        // borrowed `&mut` (no other use is being enqueued) and ordered after other streams'
        // uses (before_use).
        unsafe {
            device.backend().write(
                s,
                self.buffer.raw(),
                self.offset * elem_size::<T>(),
                bytemuck::cast_slice(data),
            )
        }
    }
    pub(crate) fn fill_on(&mut self, s: StreamId, value: T) -> Result<()> {
        if self.len == 0 {
            return Ok(());
        }
        let device = &self.buffer.device;
        device.before_use(&self.buffer.uses, s, true)?;
        // SAFETY: as for write: the range is the view's, borrowed `&mut` and ordered by
        // before_use.
        unsafe {
            device.backend().fill(
                s,
                self.buffer.raw(),
                self.offset * elem_size::<T>(),
                self.len * elem_size::<T>(),
                bytemuck::bytes_of(&value),
            )
        }
    }
    pub(crate) fn copy_from_on(&mut self, s: StreamId, src: &BufferView<'_, T>) -> Result<()> {
        same_len("copy_from", self.len, src.len)?;
        if self.len == 0 {
            return Ok(());
        }
        if self.buffer.device.same(&src.buffer.device) {
            let device = &self.buffer.device;
            device.before_use(&src.buffer.uses, s, false)?;
            device.before_use(&self.buffer.uses, s, true)?;
            // SAFETY: both ranges are their views' (inside their buffers, same length), the
            // destination is borrowed `&mut` (so it is not the source's buffer), and both
            // uses are ordered by before_use.
            unsafe {
                device.backend().copy(
                    s,
                    src.buffer.raw(),
                    src.offset * elem_size::<T>(),
                    self.buffer.raw(),
                    self.offset * elem_size::<T>(),
                    self.len * elem_size::<T>(),
                )
            }
        } else {
            let staged = src.to_vec()?;
            self.write_on(s, &staged)
        }
    }
}

/// One kernel argument, for `Device::launch_kernel`. `#[kernel]` launch functions build
/// these from their typed parameters; build them with [`Arg::buffer`],
/// [`Arg::buffer_mut`], [`Arg::view`], [`Arg::view_mut`] and [`Arg::scalar`].
///
/// The type is opaque: its constructors are the only way to make one, so an argument
/// always names a range inside its buffer, with the buffer's own element type, writable
/// only through an exclusive borrow. (It was a public enum: rebuilt with a larger offset,
/// a longer length, another element type or `writable: true`, it bound memory outside the
/// buffer from safe code.)
pub struct Arg<'a>(pub(crate) ArgKind<'a>);

impl std::fmt::Debug for Arg<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            ArgKind::Buffer {
                offset,
                len,
                elem,
                writable,
                ..
            } => write!(
                f,
                "Arg::{}({len} {elem} from element {offset})",
                if *writable { "buffer_mut" } else { "buffer" }
            ),
            ArgKind::Scalar(l) => write!(f, "Arg::scalar({l:?})"),
        }
    }
}

/// What an [`Arg`] holds (private: built only by `Arg`'s constructors).
pub(crate) enum ArgKind<'a> {
    Buffer {
        device: &'a Device,
        raw: &'a RawBuffer,
        /// The first element the kernel sees (a view's offset; 0 for a whole buffer).
        offset: usize,
        len: usize,
        elem: Type,
        writable: bool,
        uses: &'a Uses,
    },
    Scalar(Literal),
}

impl<'a> Arg<'a> {
    /// Elements `offset..offset + len` of `b`, seen by the kernel as `0..len`. (Writable
    /// bindings come from the `&mut` constructors, which hold the exclusive borrow.)
    fn range<T: Element>(b: &'a Buffer<T>, offset: usize, len: usize, writable: bool) -> Arg<'a> {
        debug_assert!(offset + len <= b.len, "a view inside its buffer");
        Arg::binding(b, offset, len, T::TYPE, writable)
    }
    /// Elements `offset..offset + len` of `b` seen by the kernel as elements of type
    /// `elem` (every binding is built here). The callers keep them inside the allocation.
    fn binding<T: Element>(
        b: &'a Buffer<T>,
        offset: usize,
        len: usize,
        elem: Type,
        writable: bool,
    ) -> Arg<'a> {
        Arg(ArgKind::Buffer {
            device: &b.device,
            raw: b.raw(),
            offset,
            len,
            elem,
            writable,
            uses: &b.uses,
        })
    }
    /// A buffer of 4-byte elements bound read-only as `Vec4` lanes of the same type:
    /// element `i` of the kernel's view is elements `4i..4i + 4` of `b` (a trailing
    /// partial vector is not part of it). Buffers start on 256-byte boundaries, so
    /// every vector is 16-byte aligned. For the library's own kernels.
    pub(crate) fn buffer_as_vec4<T: Element>(b: &'a Buffer<T>) -> Arg<'a> {
        debug_assert_eq!(T::TYPE.size_bytes(), 4, "Vec4 lanes are 4-byte elements");
        Arg::read_only_as(b, b.len / 4, dotcompute_ir::Type::vector(T::TYPE.scalar, 4))
    }
    /// The whole of `b` bound read-only as `len` elements of type `elem`, from its first
    /// byte. The callers keep `len` elements of `elem` inside the allocation.
    fn read_only_as<T: Element>(b: &'a Buffer<T>, len: usize, elem: Type) -> Arg<'a> {
        Arg::binding(b, 0, len, elem, false)
    }
    /// The whole of `b` bound read-write as `len` elements of type `elem`, from its first
    /// byte; the exclusive borrow is the caller's (`Vec4sMut` holds it). The callers keep
    /// `len` elements of `elem` inside the allocation.
    fn writable_as<T: Element>(b: &'a Buffer<T>, len: usize, elem: Type) -> Arg<'a> {
        Arg::binding(b, 0, len, elem, true)
    }
    /// A buffer of 4-byte scalars (`f32`, `i32` or `u32`) bound read-only as their bits, for
    /// a `&[u32]` kernel parameter: one kernel then moves elements of any of the three
    /// types without reading them as their type (a sort's values, which are only
    /// copied). `None` for other element types.
    ///
    /// ```
    /// use dotcompute::prelude::*;
    /// use dotcompute::Arg;
    /// #[kernel]
    /// fn reverse_words(x: &[u32], out: &mut [u32]) {
    ///     let i = global_id().x;
    ///     if i < x.len() {
    ///         out[i] = x[x.len() - 1 - i];
    ///     }
    /// }
    /// let d = Device::cpu();
    /// let x = d.upload(&[1.5f32, -2.0, 0.25])?;
    /// let mut out = d.alloc::<f32>(3)?;
    /// let args = [Arg::bits(&x).expect("f32"), Arg::bits_mut(&mut out).expect("f32")];
    /// d.launch_kernel(reverse_words::kernel(), Launch::threads(3), &args)?;
    /// drop(args);
    /// assert_eq!(out.to_vec()?, [0.25, -2.0, 1.5]);
    /// assert!(Arg::bits(&d.upload(&[1.0f64])?).is_none());
    /// # Ok::<(), dotcompute::Error>(())
    /// ```
    pub fn bits<T: Element>(b: &'a Buffer<T>) -> Option<Arg<'a>> {
        four_byte_scalar::<T>().then(|| Arg::read_only_as(b, b.len, U32_WORD))
    }
    /// [`Arg::bits`] read-write, for a `&mut [u32]` kernel parameter. `None` for other
    /// element types than `f32`, `i32` and `u32`.
    pub fn bits_mut<T: Element>(b: &'a mut Buffer<T>) -> Option<Arg<'a>> {
        four_byte_scalar::<T>().then(|| Arg::writable_as(&*b, b.len, U32_WORD))
    }
    /// A buffer bound read-only.
    pub fn buffer<T: Element>(b: &'a Buffer<T>) -> Arg<'a> {
        Arg::range(b, 0, b.len, false)
    }
    /// A view bound read-only: the kernel sees its elements as indices `0..len`.
    pub fn view<T: Element>(v: BufferView<'a, T>) -> Arg<'a> {
        Arg::range(v.buffer, v.offset, v.len, false)
    }
    /// A writable view bound read-write: the kernel sees its elements as `0..len`.
    pub fn view_mut<T: Element>(v: &'a mut BufferViewMut<'_, T>) -> Arg<'a> {
        Arg::range(&*v.buffer, v.offset, v.len, true)
    }
    /// A buffer bound read-write.
    pub fn buffer_mut<T: Element>(b: &'a mut Buffer<T>) -> Arg<'a> {
        Arg::range(&*b, 0, b.len, true)
    }
    /// A scalar by value.
    pub fn scalar<T: ScalarArg>(v: T) -> Arg<'a> {
        Arg(ArgKind::Scalar(v.literal()))
    }
}

/// The kernel type of [`Arg::bits`]'s bindings.
const U32_WORD: Type = Type::scalar(ScalarType::U32);

/// Whether `T` is `f32`, `i32` or `u32` (what [`Arg::bits`] binds as words).
fn four_byte_scalar<T: Element>() -> bool {
    matches!(
        T::TYPE,
        Type {
            scalar: ScalarType::F32 | ScalarType::I32 | ScalarType::U32,
            lanes: 1,
            ..
        }
    )
}

/// A byte buffer read by a kernel's `&[u32]` parameter as little-endian words
/// ([`Buffer::as_words`]).
#[derive(Clone, Copy)]
pub struct ByteWords<'a>(&'a Buffer<u8>);

impl Buffer<u8> {
    /// The bytes as `len.div_ceil(4)` little-endian `u32` words, for a `&[u32]` kernel
    /// parameter (read-only): word `i` holds bytes `4i..4i + 4`, byte `4i + k` in bits
    /// `8k..8k + 8`; the bytes of the last word past the buffer's end read as zero.
    /// Kernels have no 8-bit type: this is how they read bytes.
    ///
    /// ```
    /// use dotcompute::prelude::*;
    /// #[kernel]
    /// fn byte_sums(words: &[u32], sums: &mut [u32]) {
    ///     let i = global_id().x;
    ///     if i < words.len() {
    ///         let w = words[i];
    ///         sums[i] = (w & 255) + ((w >> 8) & 255) + ((w >> 16) & 255) + (w >> 24);
    ///     }
    /// }
    /// let d = Device::cpu();
    /// let bytes = d.upload(&[1u8, 2, 3, 4, 250, 6])?;
    /// let mut sums = d.alloc::<u32>(2)?;
    /// byte_sums::launch(&d, Launch::threads(2), &bytes.as_words(), &mut sums)?;
    /// assert_eq!(sums.to_vec()?, [10, 256]);
    /// # Ok::<(), dotcompute::Error>(())
    /// ```
    pub fn as_words(&self) -> ByteWords<'_> {
        ByteWords(self)
    }

    /// The whole 16-byte runs of the bytes as `len / 16` quads of words, for a
    /// `&[Vec4<u32>]` kernel parameter (read-only): quad `q` holds words `4q..4q + 4` of
    /// [`Buffer::as_words`] in `x, y, z, w`, one 16-byte load on GPUs. The last
    /// `len % 16` bytes are in no quad: read them through `as_words`. `None` when the
    /// buffer has no whole quad (a kernel parameter is never empty).
    ///
    /// ```
    /// use dotcompute::prelude::*;
    /// use dotcompute::Vec4;
    /// #[kernel]
    /// fn low_bytes(quads: &[Vec4<u32>], out: &mut [u32]) {
    ///     let i = global_id().x;
    ///     if i < quads.len() {
    ///         let q = quads[i];
    ///         out[i] = (q.x & 255) + (q.y & 255) + (q.z & 255) + (q.w & 255);
    ///     }
    /// }
    /// fn main() -> Result<(), dotcompute::Error> {
    ///     let d = Device::cpu();
    ///     let bytes = d.upload(&(0..20u8).collect::<Vec<_>>())?;
    ///     let mut out = d.alloc::<u32>(1)?;
    ///     let quads = bytes.as_word_quads().expect("20 bytes hold one quad");
    ///     low_bytes::launch(&d, Launch::threads(1), &quads, &mut out)?;
    ///     assert_eq!(out.to_vec()?, [0 + 4 + 8 + 12]);
    ///     Ok(())
    /// }
    /// ```
    pub fn as_word_quads(&self) -> Option<ByteQuads<'_>> {
        (self.len >= 16).then_some(ByteQuads(self))
    }
}

impl<T: Element> Buffer<T> {
    /// The whole runs of four elements as `len / 4` vectors, for a `&[Vec4<T>]` kernel
    /// parameter (read-only), when `T` is `f32`, `i32` or `u32`: vector `v` holds elements
    /// `4v..4v + 4` in `x, y, z, w`, one 16-byte load on GPUs. The last `len % 4` elements
    /// are in none: read them through the buffer itself. `None` for other element types,
    /// or below four elements (a kernel parameter is never empty).
    ///
    /// ```
    /// use dotcompute::prelude::*;
    /// use dotcompute::Vec4;
    /// #[kernel]
    /// fn lane_sums(v: &[Vec4<f32>], out: &mut [f32]) {
    ///     let i = global_id().x;
    ///     if i < v.len() {
    ///         let q = v[i];
    ///         out[i] = q.x + q.y + q.z + q.w;
    ///     }
    /// }
    /// fn main() -> Result<(), dotcompute::Error> {
    ///     let d = Device::cpu();
    ///     let x = d.upload(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0])?;
    ///     let mut out = d.alloc::<f32>(2)?;
    ///     let vectors = x.as_vec4s().expect("nine f32 hold two vectors");
    ///     lane_sums::launch(&d, Launch::threads(2), &vectors, &mut out)?;
    ///     assert_eq!(out.to_vec()?, [10.0, 26.0]);
    ///     Ok(())
    /// }
    /// ```
    pub fn as_vec4s(&self) -> Option<Vec4s<'_, T>> {
        (four_byte_scalar::<T>() && self.len >= 4).then_some(Vec4s(self))
    }

    /// [`Buffer::as_vec4s`] for a `&mut [Vec4<T>]` kernel parameter: the kernel reads and
    /// writes the whole runs of four elements, 16 bytes an access on GPUs; the last
    /// `len % 4` elements are in none. `None` for other element types or below four
    /// elements.
    ///
    /// ```
    /// use dotcompute::prelude::*;
    /// use dotcompute::Vec4;
    /// #[kernel]
    /// fn reverse_lanes(v: &mut [Vec4<f32>]) {
    ///     let i = global_id().x;
    ///     if i < v.len() {
    ///         let q = v[i];
    ///         v[i] = Vec4::new(q.w, q.z, q.y, q.x);
    ///     }
    /// }
    /// fn main() -> Result<(), dotcompute::Error> {
    ///     let d = Device::cpu();
    ///     let mut x = d.upload(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0])?;
    ///     let mut vectors = x.as_vec4s_mut().expect("nine f32 hold two vectors");
    ///     reverse_lanes::launch(&d, Launch::threads(2), &mut vectors)?;
    ///     assert_eq!(x.to_vec()?, [4.0, 3.0, 2.0, 1.0, 8.0, 7.0, 6.0, 5.0, 9.0]);
    ///     Ok(())
    /// }
    /// ```
    pub fn as_vec4s_mut(&mut self) -> Option<Vec4sMut<'_, T>> {
        self.as_vec4s()?;
        Some(Vec4sMut(self))
    }
}

/// A buffer of `f32`, `i32` or `u32` read four elements a load by a kernel
/// ([`Buffer::as_vec4s`]).
pub struct Vec4s<'a, T: Element>(&'a Buffer<T>);

/// A buffer of `f32`, `i32` or `u32` read and written four elements an access by a kernel
/// ([`Buffer::as_vec4s_mut`]); holds the buffer's exclusive borrow.
pub struct Vec4sMut<'a, T: Element>(&'a mut Buffer<T>);

impl<T: Element> Vec4sMut<'_, T> {
    /// The vectors' bits as a writable `&mut [Vec4<u32>]` argument of
    /// [`crate::AsStream::launch_kernel`], for a kernel generic over the element type
    /// (see [`Vec4s::bits`]), which bitcasts each lane to `u32` before it stores.
    pub fn bits(&mut self) -> Arg<'_> {
        let b = &*self.0;
        Arg::writable_as(b, b.len / 4, Vec4::<u32>::TYPE)
    }
}

impl<T: Element + dotcompute_ir::vector::VectorLane> KernelBufferMut<Vec4<T>> for Vec4sMut<'_, T>
where
    Vec4<T>: Element,
{
    fn arg_mut(&mut self) -> Arg<'_> {
        // A prefix of the allocation, which starts 16-byte aligned on every backend.
        let b = &*self.0;
        Arg::writable_as(b, b.len / 4, Type::vector(T::TYPE.scalar, 4))
    }
}

impl<T: Element> Clone for Vec4s<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T: Element> Copy for Vec4s<'_, T> {}

impl<'a, T: Element> Vec4s<'a, T> {
    /// The vectors as a read-only argument of [`crate::AsStream::launch_kernel`] (a
    /// typed launch takes `&Vec4s` itself).
    pub fn arg(self) -> Arg<'a> {
        Arg::read_only_as(self.0, self.0.len / 4, Type::vector(T::TYPE.scalar, 4))
    }

    /// The vectors' bits as a read-only `&[Vec4<u32>]` argument of
    /// [`crate::AsStream::launch_kernel`], for a kernel generic over the element type,
    /// which bitcasts each lane back (`T::bitcast(v.x)`): its host side cannot name
    /// `Vec4<T>` as a buffer element.
    pub fn bits(self) -> Arg<'a> {
        Arg::read_only_as(self.0, self.0.len / 4, Vec4::<u32>::TYPE)
    }
}

impl<T: Element + dotcompute_ir::vector::VectorLane> KernelBuffer<Vec4<T>> for Vec4s<'_, T>
where
    Vec4<T>: Element,
{
    fn arg(&self) -> Arg<'_> {
        // A prefix of the allocation, which starts 16-byte aligned on every backend.
        Vec4s::arg(*self)
    }
}

/// A byte buffer read as quads of `u32` words by a kernel ([`Buffer::as_word_quads`]).
#[derive(Clone, Copy)]
pub struct ByteQuads<'a>(&'a Buffer<u8>);

impl KernelBuffer<Vec4<u32>> for ByteQuads<'_> {
    fn arg(&self) -> Arg<'_> {
        // A prefix of the allocation, which starts 16-byte aligned on every backend.
        Arg::read_only_as(self.0, self.0.len / 16, Vec4::<u32>::TYPE)
    }
}

impl KernelBuffer<u32> for ByteWords<'_> {
    fn arg(&self) -> Arg<'_> {
        // Inside the allocation: it is whole words, the padding zeroed (Buffer::new).
        Arg::read_only_as(
            self.0,
            self.0.len.div_ceil(4),
            Type::scalar(ScalarType::U32),
        )
    }
}

/// What a `&[T]` kernel parameter accepts by reference: a [`Buffer`], a [`BufferView`] or
/// a [`BufferViewMut`] (read only). The kernel indexes a view from 0.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be passed to a `&[{T}]` kernel parameter",
    label = "expected `&Buffer<{T}>` or `&BufferView<{T}>`"
)]
pub trait KernelBuffer<T: Element> {
    fn arg(&self) -> Arg<'_>;
}

/// What a `&mut [T]` kernel parameter accepts by `&mut`: a [`Buffer`] or a
/// [`BufferViewMut`]. The kernel indexes a view from 0.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be passed to a `&mut [{T}]` kernel parameter",
    label = "expected `&mut Buffer<{T}>` or `&mut BufferViewMut<{T}>`"
)]
pub trait KernelBufferMut<T: Element> {
    fn arg_mut(&mut self) -> Arg<'_>;
}

impl<T: Element> KernelBuffer<T> for Buffer<T> {
    fn arg(&self) -> Arg<'_> {
        Arg::buffer(self)
    }
}
impl<T: Element> KernelBuffer<T> for BufferView<'_, T> {
    fn arg(&self) -> Arg<'_> {
        Arg::view(*self)
    }
}
impl<T: Element> KernelBuffer<T> for BufferViewMut<'_, T> {
    fn arg(&self) -> Arg<'_> {
        Arg::view(self.as_view())
    }
}
impl<T: Element> KernelBufferMut<T> for Buffer<T> {
    fn arg_mut(&mut self) -> Arg<'_> {
        Arg::buffer_mut(self)
    }
}
impl<T: Element> KernelBufferMut<T> for BufferViewMut<'_, T> {
    fn arg_mut(&mut self) -> Arg<'_> {
        Arg::view_mut(self)
    }
}
