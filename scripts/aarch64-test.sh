#!/usr/bin/env bash
# minstant's and minitrace's test suites built for aarch64 Linux and run
# under qemu-user (../shared/facts/aarch64.md): the counter path
# (CNTVCT_EL0), its calibration, health checks and conversions, on the
# architecture they are written for. Part of scripts/test.sh. What it needs
# is installed by `bash scripts/setup.sh aarch64`, never here.
#
#   bash scripts/aarch64-test.sh ready   # exit 0 if everything is installed
#   bash scripts/aarch64-test.sh         # run the tests
#
# Without the tools it says SKIPPED and exits 0, except under CI=true, where
# it fails. Timing under qemu means nothing (every instruction is emulated,
# the counter is the host's clock scaled to 62.5 MHz): the tests assert
# behaviour only, and size their loops down on aarch64.
set -euo pipefail
cd "$(dirname "$0")/.."

TARGET=aarch64-unknown-linux-gnu
# Debian's Rust (rustup's stays first on PATH and has no aarch64 std).
DEBIAN_CARGO=/usr/bin/cargo
DEBIAN_RUSTC=/usr/bin/rustc
DEBIAN_RUSTDOC=/usr/bin/rustdoc

missing() {
    local what=()
    for tool in "$DEBIAN_CARGO" "$DEBIAN_RUSTC" "$DEBIAN_RUSTDOC" aarch64-linux-gnu-gcc qemu-aarch64-static; do
        command -v "$tool" >/dev/null || what+=("$tool")
    done
    [ -d "$("$DEBIAN_RUSTC" --print sysroot 2>/dev/null)/lib/rustlib/$TARGET/lib" ] ||
        what+=("the $TARGET standard library (libstd-rust-web-dev:arm64)")
    [ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] || what+=("qemu-aarch64 in binfmt_misc")
    [ ${#what[@]} -eq 0 ] || { echo "${what[*]}"; return 0; }
    return 1
}

if [ "${1:-}" = ready ]; then
    if lacking=$(missing); then
        echo "aarch64-test.sh: missing: $lacking" >&2
        exit 1
    fi
    exit 0
fi

if lacking=$(missing); then
    if [ "${CI:-}" = true ]; then
        echo "aarch64-test.sh: missing: $lacking (run bash scripts/setup.sh aarch64)" >&2
        exit 1
    fi
    echo "aarch64-test.sh: SKIPPED: missing $lacking (bash scripts/setup.sh aarch64 installs it)" >&2
    exit 0
fi

export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
# Statically linked: a dynamically linked aarch64 program under qemu-user
# here hangs at its first thread spawn.
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUSTFLAGS="-C target-feature=+crt-static"
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER=qemu-aarch64-static
export RUSTC=$DEBIAN_RUSTC RUSTDOC=$DEBIAN_RUSTDOC
# Its own target directory: another compiler's artifacts beside rustup's.
export CARGO_TARGET_DIR=target/aarch64
# Tells the tests that they run emulated (loops sized down); the tests also
# assert that the counter, not the OS clock, is the source chosen here.
export MINSTANT_TEST_EMULATED=1

for package in minstant minitrace; do
    echo "aarch64-test.sh: cargo test -p $package --target $TARGET (under qemu)" >&2
    "$DEBIAN_CARGO" test -p "$package" --release --target "$TARGET"
done
