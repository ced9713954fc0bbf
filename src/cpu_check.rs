//! Whether the processor runs what this build was compiled for.
//!
//! `.cargo/config.toml` builds x86_64 Linux for x86-64-v3 (AVX2, BMI2, ...),
//! and code compiled for a feature the CPU lacks dies of SIGILL, with no
//! message. `main` asks this module first. It reads CPUID itself:
//! `is_x86_feature_detected!` answers `true` without asking the CPU for a
//! feature the build was compiled with. Owns nothing else; it must not
//! build strings or move vectors before its answer (the compiler may use
//! the features for any code, even to move a `String`), so it writes only
//! static bytes.

use std::io::Write;

/// Whether the CPU has every x86 feature this build was compiled to use;
/// if not, says on stderr which it lacks and how to build for it.
#[inline(never)]
pub fn runs_this_build() -> bool {
    let mut stderr = std::io::stderr();
    let mut runs = true;
    for (name, compiled, present) in features(&Cpuid::read()) {
        if compiled && !present {
            if runs {
                let _ = stderr.write_all(b"error: this processor lacks CPU features this build of onitb uses:");
            }
            runs = false;
            let _ = stderr.write_all(b" ");
            let _ = stderr.write_all(name.as_bytes());
        }
    }
    if !runs {
        let _ =
            stderr.write_all(b"\nbuild it for this CPU: RUSTFLAGS=\"-C target-cpu=native\" cargo build --release\n");
    }
    runs
}

/// The CPUID words the checked features are in (zero where the CPU does
/// not have the leaf), and whether the OS saves the AVX registers.
#[derive(Clone, Copy, Default)]
struct Cpuid {
    /// Leaf 1, ECX.
    leaf1_ecx: u32,
    /// Leaf 7, sub-leaf 0, EBX.
    leaf7_ebx: u32,
    /// Leaf 0x8000_0001, ECX.
    extended1_ecx: u32,
    /// XCR0 has the SSE and AVX state bits (the OS saves the registers).
    os_saves_avx: bool,
}

impl Cpuid {
    #[cfg(target_arch = "x86_64")]
    fn read() -> Cpuid {
        use std::arch::x86_64::{__cpuid, __cpuid_count, _xgetbv};
        let max_leaf = __cpuid(0).eax;
        let max_extended = __cpuid(0x8000_0000).eax;
        let leaf1_ecx = __cpuid(1).ecx;
        // OSXSAVE (bit 27): XGETBV may be run.
        let os_saves_avx = if leaf1_ecx & (1 << 27) != 0 {
            // SAFETY: `_xgetbv` needs the XSAVE feature, which OSXSAVE
            // implies (the OS has turned it on).
            unsafe { _xgetbv(0) & 0b110 == 0b110 }
        } else {
            false
        };
        Cpuid {
            leaf1_ecx,
            leaf7_ebx: if max_leaf >= 7 { __cpuid_count(7, 0).ebx } else { 0 },
            extended1_ecx: if max_extended >= 0x8000_0001 { __cpuid(0x8000_0001).ecx } else { 0 },
            os_saves_avx,
        }
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn read() -> Cpuid {
        Cpuid::default()
    }
}

/// For each x86-64-v3 feature: its name, whether this build was compiled
/// to use it, and whether `cpu` has it (bits from the Intel and AMD
/// manuals' CPUID tables). Other targets were compiled for none of them.
fn features(cpu: &Cpuid) -> [(&'static str, bool, bool); 13] {
    let (ecx1, ebx7, ecx81) = (cpu.leaf1_ecx, cpu.leaf7_ebx, cpu.extended1_ecx);
    let bit = |word: u32, n: u32| word >> n & 1 == 1;
    let avx = bit(ecx1, 28) && cpu.os_saves_avx;
    [
        ("sse3", cfg!(target_feature = "sse3"), bit(ecx1, 0)),
        ("ssse3", cfg!(target_feature = "ssse3"), bit(ecx1, 9)),
        ("sse4.1", cfg!(target_feature = "sse4.1"), bit(ecx1, 19)),
        ("sse4.2", cfg!(target_feature = "sse4.2"), bit(ecx1, 20)),
        ("popcnt", cfg!(target_feature = "popcnt"), bit(ecx1, 23)),
        ("movbe", cfg!(target_feature = "movbe"), bit(ecx1, 22)),
        ("avx", cfg!(target_feature = "avx"), avx),
        ("fma", cfg!(target_feature = "fma"), avx && bit(ecx1, 12)),
        ("f16c", cfg!(target_feature = "f16c"), avx && bit(ecx1, 29)),
        ("avx2", cfg!(target_feature = "avx2"), avx && bit(ebx7, 5)),
        ("bmi1", cfg!(target_feature = "bmi1"), bit(ebx7, 3)),
        ("bmi2", cfg!(target_feature = "bmi2"), bit(ebx7, 8)),
        ("lzcnt", cfg!(target_feature = "lzcnt"), bit(ecx81, 5)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_machine_runs_this_build() {
        assert!(features(&Cpuid::read()).iter().all(|&(_, compiled, present)| present || !compiled));
    }

    #[test]
    fn a_cpu_without_the_leaves_lacks_every_compiled_feature() {
        let missing: Vec<_> =
            features(&Cpuid::default()).into_iter().filter(|&(_, compiled, present)| compiled && !present).collect();
        let compiled = features(&Cpuid::default()).into_iter().filter(|&(_, compiled, _)| compiled).count();
        assert_eq!(missing.len(), compiled);
        #[cfg(all(target_arch = "x86_64", target_feature = "avx2"))]
        assert!(missing.iter().any(|&(name, ..)| name == "avx2"));
    }

    #[test]
    fn avx_needs_the_os_to_save_its_registers() {
        let cpu = Cpuid { leaf1_ecx: u32::MAX, leaf7_ebx: u32::MAX, extended1_ecx: u32::MAX, os_saves_avx: false };
        for (name, _, present) in features(&cpu) {
            assert_eq!(present, !["avx", "avx2", "fma", "f16c"].contains(&name), "{name}");
        }
        let cpu = Cpuid { os_saves_avx: true, ..cpu };
        assert!(features(&cpu).iter().all(|&(_, _, present)| present));
    }
}
