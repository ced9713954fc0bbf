//! Cache hints: asking the CPU to start loading memory that will be read
//! soon. Owns the one `unsafe` prefetch intrinsic that the solver's kernels
//! (successor blocks scattered over a landing slice) and the deep check
//! (successor layouts anywhere in the table) share; knows nothing of what
//! the memory holds.

/// Asks the CPU to start loading the cache line of `data`'s first element
/// into every cache level. A hint: it changes no value, and does nothing
/// off x86_64.
#[inline(always)]
pub(crate) fn prefetch<T>(data: &[T]) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing and writes nothing; any address is
    // allowed, and this one is the slice's own start.
    unsafe {
        std::arch::x86_64::_mm_prefetch(data.as_ptr() as *const i8, std::arch::x86_64::_MM_HINT_T0)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = data;
}

/// As [`prefetch`], the line of `data[index]`, with no bounds check (the
/// kernels ask for every kept move's block before reading any, and the
/// check was a third of that loop's instructions). An index out of bounds
/// asks for some other line, which is harmless: a prefetch never faults.
#[inline(always)]
pub(crate) fn prefetch_element<T>(data: &[T], index: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing and writes nothing; any address is
    // allowed (`wrapping_add` makes one without claiming it is in bounds).
    unsafe {
        std::arch::x86_64::_mm_prefetch(data.as_ptr().wrapping_add(index) as *const i8, std::arch::x86_64::_MM_HINT_T0)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (data, index);
}
