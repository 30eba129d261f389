# Cross-compiling for 64-bit Arm Linux with Debian's gcc-aarch64-linux-gnu against the arm64
# multiarch dev packages (dpkg --add-architecture arm64; headers in /usr/include, libraries in
# /usr/lib/aarch64-linux-gnu). scripts/test-arm64.sh installs both and runs the result under
# qemu-aarch64. Usage: cmake -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake ...
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# Multiarch: find_package and find_library look under lib/aarch64-linux-gnu of the usual
# prefixes, never in the host's lib/x86_64-linux-gnu.
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# pkg-config (Highway, PCRE2, utf8proc) must read the arm64 .pc files, not the host's.
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
# Test discovery (gtest_discover_tests) runs the test binaries at build time, and ctest runs
# them after: both go through qemu-user, which finds the arm64 loader and libraries of the
# multiarch packages in / (no -L needed). QEMU_CPU picks the emulated CPU (NEON only, SVE lengths).
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)
